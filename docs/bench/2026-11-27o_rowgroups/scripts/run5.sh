#!/bin/bash
# The grid's batch 256 and 512 points with two clusters a step.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
for b in 256 512; do
  timeout 270 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false "--points=mlp batch $b" --out_dir=$OUT/grid$b > $OUT/grid$b.log 2>&1; echo "grid $b rc $?"
  grep "mlp batch $b |" $OUT/grid$b/GRID.md
done
