#!/bin/bash
# #53's float64 parity at 32-256-1024-256-1 on its current path (the tile kernel, its default on
# Hopper with jax 0.11 since 2026-12-07; no record on that path yet, docs/bench/current/PARITY.md):
# each epoch from the float64 run's weights, pallas' distance at most twice xla's, seeds 0-2,
# 3 epochs (as 32-256-256-1's record). Checkout root, no data (synthetic); a few minutes.
set -u
export PYTHONPATH=.
timeout 540 python3 -u -m experiments.parity --reference=float64 --seeds=0,1,2 --epochs=3 \
  "--point=regression hidden 256-1024-256" --out_dir=$OUT/parity 2>&1 | grep -v -i warn \
  | tail -20 | tee $OUT/parity.txt
