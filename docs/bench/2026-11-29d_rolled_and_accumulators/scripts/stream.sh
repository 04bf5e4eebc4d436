#!/bin/bash
# The streamed population kernel with its walk over W0's 13 tiles rolled (a loop over pairs of
# tiles): the check on the draw that once failed (--seed=896467452), ptxas' report and the PTX
# (for probes.spills here), its times whole and apart. Checkout root, Hopper GPU.
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee -a "$out/$name"; }
run check.txt 150 -m experiments.check_kernels --only=stream_population --seed=896467452
rm -rf /tmp/dump && mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=/tmp/dump timeout 90 python3 -c "
import jax
from pallas_kernels.fused import stream_population_mgpu as k
from probes.stream_population import problem
jax.block_until_ready(jax.jit(k.train_steps)(*problem(8, 3, False)))" > "$out/ptxas.txt" 2>&1
grep -iE "registers|spill|serializ|stack frame" "$out/ptxas.txt" /tmp/dump/* 2>/dev/null | grep -v mlir | head -20 | tee "$out/ptxas_summary.txt"
ls -la /tmp/dump | head; p=$(ls -S /tmp/dump/*.ptx 2>/dev/null | head -1); [ -n "$p" ] && gzip -c "$p" > "$out/kernel.ptx.gz"
run floor.txt 220 -m probes.stream_population --floor --members=64,8 --repeats=3
