# Cold runs (each with an empty compilation cache) of the MLP and softmax regression references,
# xla and pallas alternating, $1 rounds, after one throwaway run of each impl (the host's file
# caches warmed, as in benchmarks.end_to_end's later rows).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data XLA_PYTHON_CLIENT_PREALLOCATE=false
for impl in xla pallas; do
  python3 -m experiments.mnist --model=mlp --impl=$impl --epochs=1 --compilation_cache=/tmp/throwaway_$impl --out=/tmp/t.json > /dev/null 2>&1
done
for r in $(seq 1 "$1"); do
  for w in mlp logreg; do
    for impl in xla pallas; do
      c=$(mktemp -d)
      t0=$(date +%s.%N)
      python3 -m experiments.mnist --model=$w --impl=$impl --compilation_cache=$c/cache --out=$c/r.json > /dev/null 2>&1
      t1=$(date +%s.%N)
      python3 -c "import json; d=json.load(open('$c/r.json')); print(f'round $r {\"$w\":6s} {\"$impl\":6s} wall {$t1-$t0:6.2f} s  compile {d[\"compile_time_s\"]:5.2f} s  train {d[\"train_time_s\"]:.3f} s')" || echo "round $r $w $impl failed"
      rm -rf $c
    done
  done
done
