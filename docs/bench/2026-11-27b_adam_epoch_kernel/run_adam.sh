#!/bin/bash
# Adam in the grid epoch kernel: its checks against float64, the grid's "mlp adam" point, and
# the float64 parity criterion there. H100, jax 0.11.2.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 280 python3 -m experiments.check_kernels --only=epoch > $OUT/check_epoch.log 2>&1; echo "check rc $?"
grep -iE "adam|FAIL|passed|cases" $OUT/check_epoch.log | tail -14
timeout 150 python3 -m benchmarks.bench --grid --alternatives --seeds=0,1,2 --plots=false "--points=mlp adam" --out_dir=$OUT/grid > $OUT/grid.log 2>&1; echo "grid rc $?"
grep -E "mlp adam|points" $OUT/grid/GRID.md | tail -3
timeout 150 python3 -m experiments.parity --reference=float64 --seeds=0,1,2 --epochs=2 "--point=mlp adam" > $OUT/parity.log 2>&1; echo "parity rc $?"
tail -12 $OUT/parity.log
