#!/bin/bash
# Session 2026-12-05's second device call (checkout root, one H100, jax 0.11.2, logs under
# $OUT): the grid's three points whose kernels changed on an H200 since the H100's grid
# (regression 32-256-256-1: the phase kernel; 784-256-1024-256-10: resident tiles;
# 32-256-1024-256-1: the tile kernel, xla by default), every path timed (--alternatives).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
out=${OUT:-/tmp/out}
timeout 580 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false --alternatives \
  "--points=regression hidden 256-256,mlp hidden 256-1024-256,regression hidden 256-1024-256" \
  --out_dir="$out/grid" > "$out/grid.txt" 2>&1
grep -v Warning "$out/grid.txt" | tail -30
