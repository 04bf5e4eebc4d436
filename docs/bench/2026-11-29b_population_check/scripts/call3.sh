#!/bin/bash
# Session 2026-11-29b's third device call (checkout root, Hopper GPU, logs under $OUT): the
# streamed population kernel's check after the one-warpgroup form was dropped, its profile at
# 16, 32 and 64 members and on one set of batches (how each scope grows with the members), then
# where a cold run's compile goes (JAX_LOG_COMPILES) and a process's floor (import jax, the GPU
# client, one tiny jit).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 -m "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee -a "$out/$name"; }
run check.txt 150 experiments.check_kernels --only=stream_population
run profile.txt 120 probes.stream_population --profile --members=16,32,64
run profile.txt 60 probes.stream_population --profile --shared --members=64
for impl in xla pallas; do
  echo "== JAX_LOG_COMPILES=1 experiments.mnist --impl=$impl (cold, cache /tmp/c_$impl)" >> "$out/compiles.txt"
  JAX_LOG_COMPILES=1 timeout 90 python3 -m experiments.mnist --impl=$impl --compilation_cache=/tmp/c_$impl 2>&1 \
    | grep -E "Finished|done:|compiling" >> "$out/compiles.txt"
done
for i in 1 2 3; do
  python3 -c "
import time; t = time.perf_counter()
import jax, jax.numpy as jnp; a = time.perf_counter()
jax.devices(); b = time.perf_counter()
jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.ones(3))); c = time.perf_counter()
print(f'import jax {a - t:.2f} s, GPU client {b - a:.2f} s, first tiny jit {c - b:.2f} s')" >> "$out/floor.txt" 2>&1
done
cat "$out/compiles.txt" "$out/floor.txt"
