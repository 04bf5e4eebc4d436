#!/bin/bash
# The next device call for the streamed population kernel (checkout root, Hopper GPU, logs
# under $OUT; about 4 minutes). On 2026-11-29 its walks over W0 alone took 34.4 us a step at 64
# members and its output layer alone 34.9, but the whole kernel 180.1 (90.4 at 8 members): the
# two together cost 110 us more than apart, and more with more members. A guess to test:
# registers spilled to local memory in the whole kernel (its traffic then competes with the
# weight stream for L2 and HBM), or wgmma serialized by ptxas. ptxas' report of each form
# (registers, spill stores and loads, serialization warnings), then the floors again with the
# output layer alone at 8 members. Not yet run (written 2026-11-29, second session).
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
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
timeout 150 python3 -m probes.stream_population --floor --members=8 --repeats=3 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee "$out/floor8.txt"
