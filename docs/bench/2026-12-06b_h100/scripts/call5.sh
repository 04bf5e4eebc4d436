# A warm run of the MLP reference for xla and pallas under cProfile, each after a cold run that
# filled its own compilation cache; then a second warm run of each without the profiler.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data XLA_PYTHON_CLIENT_PREALLOCATE=false
for impl in xla pallas; do
  c=/tmp/cache_$impl
  python3 -m experiments.mnist --model=mlp --impl=$impl --compilation_cache=$c --out=/tmp/cold_$impl.json > /dev/null 2>&1
  t0=$(date +%s.%N)
  python3 -m cProfile -o $OUT/warm_$impl.prof -m experiments.mnist --model=mlp --impl=$impl --compilation_cache=$c --out=/tmp/w_$impl.json > /dev/null 2>&1
  t1=$(date +%s.%N)
  python3 -m experiments.mnist --model=mlp --impl=$impl --compilation_cache=$c --out=/tmp/w2_$impl.json > /dev/null 2>&1
  t2=$(date +%s.%N)
  echo "$impl warm under cProfile $(python3 -c "print(round($t1-$t0,2))") s, warm $(python3 -c "print(round($t2-$t1,2))") s"
done | tee $OUT/warm.txt
