# Cold runs of the MLP reference, alternating: xla, pallas (loads with given layouts), pallas with
# the loads as before (patched back in the process); each with an empty compilation cache.
# Checkout root; $OUT the output folder; $1 rounds; $2 the variants (default: xla fixed cast).
# Each run's log and JSON go to $OUT/runs.tar.
set -u
mkdir -p /tmp/runs
cast='import runpy, sys
from pallas_kernels.ops import dense_mgpu as d
from pallas_kernels.fused import cluster_mlp_mgpu as cm
cm._load = lambda ref, layout, **given: d.load(ref, layout)
sys.argv = ["mnist"] + sys.argv[1:]
runpy.run_module("experiments.mnist", run_name="__main__")'
for r in $(seq 1 "$1"); do
  for v in ${2:-xla fixed cast}; do
    c=$(mktemp -d)
    impl=pallas; [ $v = xla ] && impl=xla
    t0=$(date +%s.%N)
    if [ $v = cast ]; then
      python3 -c "$cast" --model=mlp --impl=pallas --compilation_cache=$c/cache --out=/tmp/runs/cold_${v}_$r.json > /tmp/runs/cold_${v}_$r.log 2>&1
    else
      python3 -m experiments.mnist --model=mlp --impl=$impl --compilation_cache=$c/cache --out=/tmp/runs/cold_${v}_$r.json > /tmp/runs/cold_${v}_$r.log 2>&1
    fi
    t1=$(date +%s.%N)
    python3 -c "import json,sys; d=json.load(open('/tmp/runs/cold_${v}_$r.json')); print(f'round $r {\"$v\":6s} wall {$t1-$t0:6.2f} s  compile {d[\"compile_time_s\"]:6.2f} s  train {d[\"train_time_s\"]:.3f} s  path {d[\"path\"]}')" || echo "round $r $v failed"
    rm -rf $c
  done
done
tar -C /tmp -cf $OUT/runs.tar runs
