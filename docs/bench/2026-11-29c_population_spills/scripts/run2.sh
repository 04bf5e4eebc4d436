#!/bin/bash
# draw2.py (does member 2's departure follow its values or its place?), then the whole
# kernel's SASS (where its spills' local loads and stores sit). Checkout root, Hopper GPU.
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out/sass"
timeout 240 python3 docs/bench/2026-11-29c_population_spills/scripts/draw2.py 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee "$out/draw2.txt"
MOSAIC_GPU_DUMP_SASS=1 MOSAIC_GPU_DUMP_TO="$out/sass" timeout 120 python3 -c "
import jax
from pallas_kernels.fused import stream_population_mgpu as k
from probes.stream_population import problem
jax.block_until_ready(jax.jit(k.train_steps)(*problem(8, 3, False)))" > "$out/sass_log.txt" 2>&1
ls -la "$out/sass" | head
