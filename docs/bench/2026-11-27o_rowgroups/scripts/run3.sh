#!/bin/bash
# The passes' final form: check_kernels' batch cases, then the grid's batch 128 and 256 points.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 .device/batch_check.py > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "ok  |FAIL|Error" $OUT/check.log | cut -c1-120
for b in 128 256; do
  timeout 170 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false "--points=mlp batch $b" --out_dir=$OUT/grid$b > $OUT/grid$b.log 2>&1; echo "grid $b rc $?"
  grep "mlp batch $b |" $OUT/grid$b/GRID.md
done
