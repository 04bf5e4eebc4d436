#!/bin/bash
# The streamed population kernel with its partial logits on the tensor cores (W1^T by h^T's
# parts, in a W0 slot and dz's buffer): the check on --seed=896467452, its times whole and
# apart, the population at 64 members against a cluster a member and xla, ptxas' report.
# Checkout root, Hopper GPU, MNIST under .data/data.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=.data/data
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee -a "$out/$name"; }
run check.txt 100 -m experiments.check_kernels --only=stream_population --seed=896467452
run floor.txt 110 -m probes.stream_population --floor --members=64,8 --repeats=3
run stream_vs_cluster.txt 100 docs/bench/2026-11-29d_rolled_and_accumulators/scripts/stream_vs_cluster.py 64 2
MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/dump timeout 50 python3 -c "
import jax
from pallas_kernels.fused import stream_population_mgpu as k
from probes.stream_population import problem
jax.block_until_ready(jax.jit(k.train_steps)(*problem(8, 3, False)))" > /dev/null 2>&1
grep -ihE "registers|spill|serializ" /tmp/dump/*.ptxas 2>/dev/null | tee "$out/ptxas_summary.txt"
