#!/bin/bash
# Session 2026-12-05's third device call (checkout root, one H100, jax 0.11.2, logs under $OUT):
# the cluster kernel's epoch in Warpgroup and Lane semantics at the grid's shapes.
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
timeout 570 python3 docs/bench/2026-12-05a_h100/scripts/semantics_probe.py 256:64:float32 \
  256:256:float32 256:512:float32 1024:64:float32 256:64:bfloat16 256:128:float32 \
  2048:64:float32 > "$out/semantics_probe.txt" 2>&1
grep -v Warning "$out/semantics_probe.txt"
