#!/bin/bash
# The next device call for the streamed population kernel (checkout root, Hopper GPU, logs
# under $OUT; about 5 minutes). On 2026-11-29 its walks over W0 alone took 34.4 us a step at 64
# members and its output layer alone 34.9, but the whole kernel 180.1 (90.4 at 8 members): 110
# us more together than apart, growing with the members. The guess: registers spilled (ten
# classes' (64,) rows live at once, 16 registers a thread each), their local memory traffic
# competing with the weight stream. The output layer has since been rewritten to hold one
# class's rows at a time (the same arithmetic in the same order), not yet run. So: its check,
# ptxas' report of the three forms (registers, spills, serialized wgmma), then its times whole
# and apart. Not yet run (written 2026-11-29, second session).
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 -m "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee -a "$out/$name"; }
run check.txt 150 experiments.check_kernels --only=stream_population
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
run floor.txt 200 probes.stream_population --floor --members=64,8 --repeats=3
