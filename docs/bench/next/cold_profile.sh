#!/bin/bash
# #54: where a cold process's compile goes, xla against pallas (the MLP reference, jax 0.11.2):
# one run a impl with an empty cache of its own under cProfile; the entries by cumulative time
# (the profiler about doubles Python-heavy times). MNIST carried (carry [".data"]); about 1.5
# minutes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
for impl in xla pallas; do
  c=/tmp/cp_cache_$impl
  rm -rf $c
  TIMEFORMAT="$impl cold wall %R s (under cProfile)"
  time (python3 -m cProfile -o $OUT/cold_$impl.prof -m experiments.mnist --impl=$impl \
    --compilation_cache=$c --out=$OUT/cold_$impl.json > $OUT/cold_$impl.log 2>&1)
  python3 - $OUT/cold_$impl.prof <<'PY' > $OUT/cold_$impl.top.txt
import pstats, sys
pstats.Stats(sys.argv[1]).sort_stats("cumulative").print_stats(60)
PY
  grep -E "compile|lower|backend|mosaic|pallas|triton|train|evaluat" $OUT/cold_$impl.top.txt \
    | head -25
done
