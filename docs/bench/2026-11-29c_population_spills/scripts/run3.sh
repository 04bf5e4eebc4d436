#!/bin/bash
# The streamed population kernel with each W0 tile's forward products in an accumulator of
# their own (added to z in float32): the check on the draw that failed (--seed=896467452) and on
# a fresh one, ptxas' report, its times whole and apart. Checkout root, Hopper GPU.
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee -a "$out/$name"; }
run check.txt 150 -m experiments.check_kernels --only=stream_population --seed=896467452
run check.txt 150 -m experiments.check_kernels --only=stream_population
MOSAIC_GPU_DUMP_PTXAS=1 timeout 90 python3 -c "
import jax
from pallas_kernels.fused import stream_population_mgpu as k
from probes.stream_population import problem
jax.block_until_ready(jax.jit(k.train_steps)(*problem(8, 3, False)))" > "$out/ptxas.txt" 2>&1
grep -iE "registers|spill|serializ|stack frame" "$out/ptxas.txt" | tee "$out/ptxas_summary.txt"
run floor.txt 200 -m probes.stream_population --floor --members=64,8 --repeats=3
