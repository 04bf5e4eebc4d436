# Calls 3 and 4: the early form's second design (W1 updated in the next step's A; call 4: C's small sends and the arrival beside the dW1 product) against the kernel
# before; if faster, its checks and the grid's point.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 docs/bench/2026-12-06a_h100/scripts/early_dw1.py > $OUT/late_w1b.txt 2>&1; tail -4 $OUT/late_w1b.txt
if python3 -c "
import re, sys
t = open('$OUT/late_w1b.txt').read()
m = dict(re.findall(r'early=(\w+): median ([\d.]+)', t))
sys.exit(0 if float(m['True']) < float(m['False']) else 1)"; then
  sed -i "s/early: bool = False/early: bool = True/" pallas_kernels/fused/grid_regression_mgpu.py
  timeout 200 python3 -m experiments.check_kernels --only=grid_regression > $OUT/check_late_w1b.txt 2>&1; tail -1 $OUT/check_late_w1b.txt
  timeout 200 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false "--points=regression hidden 256-256" --out_dir=$OUT/grid_late_w1b > $OUT/grid_late_w1b.txt 2>&1; grep "^| regr" $OUT/grid_late_w1b/GRID.md
fi
