#!/bin/bash
# #53's "one bench run from a clean checkout": all 32 grid points, xla and pallas, seeds 0-2,
# the default paths, on the H100 with the device's jax 0.11.2, in four calls (one machine, back
# to back; a quarter of the grid each, about 4-5 minutes by the current grid's compile and
# train times). From the checkout root of a commit with no local changes, MNIST carried:
#   carry [".data"]; command: bash docs/bench/2026-12-07h_h100/full_grid.sh 1   (then 2, 3, 4)
# Then here: python -m benchmarks.bench --grid --merge=<the four grid.json> --out_dir=<a dated
# folder>, and that folder's GRID.md replaces docs/bench/current's if the run is whole.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
# The quarters, balanced by docs/bench/current/grid.json's compile and train times.
case "${1:?which quarter: 1, 2, 3 or 4}" in
  1) points="mlp hidden 1024,mlp batch 128,mlp hidden 2048,mlp hidden 256-256,cnn reference"
     points="$points,cnn batch 128,mlp momentum,regression small" ;;
  2) points="mlp hidden 512,mlp reference,mlp hidden 512-256,regression hidden 256-256,cnn adam"
     points="$points,mlp batch 32,regression hidden 128,regression large" ;;
  3) points="mlp hidden 128,mlp tf32,mlp bfloat16,mlp hidden 256-1024-256,cnn batch 256,cnn sgd"
     points="$points,cnn tf32,softmax regression" ;;
  4) points="mlp batch 512,mlp batch 256,regression hidden 256-1024-256,mlp adam,cnn batch 32"
     points="$points,mlp batch 16,regression hidden 1024,regression medium" ;;
  *) echo "which quarter: 1, 2, 3 or 4, not $1"; exit 2 ;;
esac
# The device's copy is the working tree without .git: note `git log -1` and an empty
# `git status --short` here before the calls (the clean checkout the run comes from).
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
timeout 570 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false "--points=$points" \
  --out_dir=$OUT/grid_$1 > $OUT/grid_$1.log 2>&1
echo "rc $?"
grep -A40 "^| point" $OUT/grid_$1/GRID.md | head -12
