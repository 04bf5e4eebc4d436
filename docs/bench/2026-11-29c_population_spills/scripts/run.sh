#!/bin/bash
# The streamed population kernel with its learning rate as one register (not a (64, 64) tile):
# ptxas' report (registers, spills), its check, its times whole and apart, and the check's
# failing draw of 2026-11-29 under nudges (draw.py). Checkout root, Hopper GPU, logs under $OUT.
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
here=docs/bench/2026-11-29c_population_spills/scripts
for parts in all walk outputs; do
  echo "== ptxas, parts=$parts" >> "$out/ptxas.txt"
  MOSAIC_GPU_DUMP_PTXAS=1 timeout 90 python3 -c "
import functools, jax
from pallas_kernels.fused import stream_population_mgpu as k
from probes.stream_population import problem
args = problem(8, 3, False)
jax.block_until_ready(jax.jit(functools.partial(k.train_steps, parts='$parts'))(*args))" \
    >> "$out/ptxas.txt" 2>&1
done
grep -iE "== ptxas|registers|spill|serializ|stack frame" "$out/ptxas.txt" | tee "$out/ptxas_summary.txt"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee -a "$out/$name"; }
run floor.txt 200 -m probes.stream_population --floor --members=64,8 --repeats=3
run draw.txt 150 $here/draw.py
run check.txt 150 -m experiments.check_kernels --only=stream_population
