#!/bin/bash
# Session 2026-11-29b's second device call (checkout root, Hopper GPU, logs under $OUT): the
# streamed population kernel (two warpgroups a CTA, the one-warpgroup form dropped) at 60 and
# 64 members (does 64 run in two waves?) and its profile at 8 and 64; then the backends work's
# time to a trained network and its reference rows under the guard
# (docs/bench/2026-11-29a_backends/scripts/next.sh, steps 3 and 4).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 -m "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee -a "$out/$name"; }
run stream_population.txt 120 probes.stream_population --members=60,64 --repeats=3
run profile.txt 100 probes.stream_population --profile --members=8,64
run e2e.txt 200 benchmarks.end_to_end --workloads=mlp,logreg --out_dir="$out/e2e"
run grid.txt 150 benchmarks.bench --grid --plots=false --out_dir="$out/grid" \
  "--points=mlp reference,softmax regression,regression large"
