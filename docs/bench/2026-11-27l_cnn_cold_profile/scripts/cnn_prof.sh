#!/bin/bash
# Where a cold `experiments.mnist --model=cnn --impl=pallas --epochs=1` spends its time.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
export JAXSHALLOW_COMPILATION_CACHE=/tmp/cold_cache XDG_CACHE_HOME=/tmp/cold_xdg JAX_LOG_COMPILES=1
rm -rf /tmp/cold_cache /tmp/cold_xdg
t0=$(date +%s.%N)
python3 -m cProfile -o /tmp/cnn.prof -m experiments.mnist --model=cnn --impl=pallas --epochs=1 > $OUT/cnn_pallas.log 2>&1
t1=$(date +%s.%N); echo "pallas wall (profiled) $t0 $t1"
grep -E "Finished|compil|done:" $OUT/cnn_pallas.log | cut -c1-220 | tail -30
python3 - <<'PY' > $OUT/cnn_prof.txt
import pstats
p = pstats.Stats("/tmp/cnn.prof"); p.sort_stats("cumulative").print_stats(45)
PY
head -80 $OUT/cnn_prof.txt | tail -60 | cut -c1-200
