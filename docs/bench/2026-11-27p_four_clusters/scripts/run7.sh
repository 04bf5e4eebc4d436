#!/bin/bash
# Four clusters a step at 256/512 (butterfly exchange, early sends), Warpgroup semantics: checks, then grid.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 320 python3 .device/batch_check.py > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "ok  |FAIL|Error" $OUT/check.log | cut -c1-130
for b in 512 256; do
  timeout 120 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false "--points=mlp batch $b" --out_dir=$OUT/grid$b > $OUT/grid$b.log 2>&1; echo "grid $b rc $?"
  grep "mlp batch $b |" $OUT/grid$b/GRID.md
done
