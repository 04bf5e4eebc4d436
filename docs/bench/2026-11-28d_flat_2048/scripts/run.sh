#!/bin/bash
# One call: the 2048 check and epoch time, then the grid's point (seeds 0-2).
export PYTHONPATH=$PWD JAXSHALLOW_DATA_DIR=$PWD/.data JAXSHALLOW_COMPILATION_CACHE=off
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
D=docs/bench/2026-11-28d_flat_2048
timeout 200 python -u $D/scripts/check2048.py > $OUT/check2048.log 2>&1
echo "check rc=$?" >> $OUT/check2048.log
if grep -q "^ok" $OUT/check2048.log; then
  timeout 240 python -u -m benchmarks.bench --grid --seeds=0,1,2 --plots=false \
    "--points=mlp hidden 2048" --out_dir=$OUT/grid > $OUT/grid.log 2>&1
  echo "grid rc=$?" >> $OUT/grid.log
fi
cat $OUT/check2048.log | grep -v "^ *$" | tail -8; tail -n 6 $OUT/grid.log
