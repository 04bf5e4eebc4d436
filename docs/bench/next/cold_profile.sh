#!/bin/bash
# #54: where a cold process's compile goes, xla against pallas, for the CNN and softmax
# regression (jax 0.11.2; pallas compiled longer than xla in every round for both on
# 2026-12-08, by more than its training saves): one run a workload and impl with an empty cache
# of its own under cProfile; the entries by cumulative time (the profiler about doubles
# Python-heavy times). MNIST carried (carry [".data"]); about 2 minutes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
for model in cnn logreg; do
  for impl in xla pallas; do
    c=/tmp/cp_cache_${model}_$impl
    rm -rf $c
    TIMEFORMAT="$model $impl cold wall %R s (under cProfile)"
    time (python3 -m cProfile -o $OUT/cold_${model}_$impl.prof -m experiments.mnist \
      --model=$model --impl=$impl --compilation_cache=$c --out=$OUT/cold_${model}_$impl.json \
      > $OUT/cold_${model}_$impl.log 2>&1)
    python3 - $OUT/cold_${model}_$impl.prof <<'PY' > $OUT/cold_${model}_$impl.top.txt
import pstats, sys
pstats.Stats(sys.argv[1]).sort_stats("cumulative").print_stats(60)
PY
    grep -E "compile|lower|backend|mosaic|pallas|triton" $OUT/cold_${model}_$impl.top.txt \
      | head -12
  done
done
