#!/bin/bash
# The breadth grid, one process a point (a timeout loses one point, not the run); args: points.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
mkdir -p /tmp/grid
i=0
deadline=$(( $(date +%s) + ${BUDGET:-540} ))
for p in "$@"; do
  i=$((i+1))
  left=$(( deadline - $(date +%s) ))
  if [ $left -lt 20 ]; then echo "skip $p: no time left"; continue; fi
  PYTHONPATH=. timeout $left python3 -m benchmarks.bench --grid ${ALT---alternatives} --seeds=0,1,2 \
    --plots=false "--points=$p" --out_dir=/tmp/grid/$i > /tmp/grid/$i.log 2>&1
  echo "rc $? $p: $(tail -2 /tmp/grid/$i.log | head -1)"
done
tar czf $OUT/grid.tgz -C /tmp grid
