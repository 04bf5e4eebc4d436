#!/bin/bash
# #54: where a warm process's 3-3.5 s go, xla against pallas (the MLP reference, jax 0.11.2):
# one cold run fills a cache of its own, then a warm run under cProfile, the top entries by
# cumulative time and the import time of the script's modules (python -X importtime). MNIST
# carried (carry [".data"]); about 2 minutes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
for impl in xla pallas; do
  c=/tmp/wp_cache_$impl
  rm -rf $c
  python3 -m experiments.mnist --impl=$impl --compilation_cache=$c --out=/tmp/cold_$impl.json \
    > /dev/null 2>&1
  TIMEFORMAT="$impl warm wall %R s (under cProfile)"
  time (python3 -X importtime -m cProfile -o $OUT/warm_$impl.prof \
    -m experiments.mnist --impl=$impl --compilation_cache=$c --out=$OUT/warm_$impl.json \
    > $OUT/warm_$impl.log 2> $OUT/warm_$impl.err)
  python3 - $OUT/warm_$impl.prof <<'PY' | tee $OUT/warm_$impl.top.txt
import pstats, sys
pstats.Stats(sys.argv[1]).sort_stats("cumulative").print_stats(25)
PY
  grep "import time" $OUT/warm_$impl.err | sort -t'|' -k2 -n | tail -8
done
