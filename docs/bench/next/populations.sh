#!/bin/bash
# Populations of the reference MLP on one Hopper GPU with the default paths (jax 0.11: the
# streamed kernel for whole launches of 64 members, a cluster a member below), against xla, in
# one process; then the streamed kernel's check on a fresh draw. Checkout root; MNIST under
# .data/data (carry .data).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=.data/data
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee -a "$out/$name"; }
run pop.txt 330 -m benchmarks.population_bench --sizes=8,64,128,512 --impls=xla,pallas \
  --epochs=2 --dp_batch=0 --out="$out/pop.json"
run check.txt 120 -m experiments.check_kernels --only=stream_population
