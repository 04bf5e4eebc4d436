#!/bin/bash
# Session 2026-12-05's fifth device call (checkout root, one H100, jax 0.11.2, logs under $OUT):
# after cluster_mlp_mgpu.semantics took Lane for four or more passes and for the network
# without clusters on jax 0.11: those shapes' checks, then the grid's three points.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
out=${OUT:-/tmp/out}
timeout 170 python3 docs/bench/2026-12-05a_h100/scripts/check_lane.py > "$out/check_lane.txt" 2>&1
grep -v Warning "$out/check_lane.txt"
timeout 270 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false \
  "--points=mlp batch 256,mlp batch 512,mlp hidden 2048" --out_dir="$out/grid_lane" \
  > "$out/grid_lane.txt" 2>&1
grep -v "Warning\|^W1\|^I1" "$out/grid_lane.txt" | tail -8
