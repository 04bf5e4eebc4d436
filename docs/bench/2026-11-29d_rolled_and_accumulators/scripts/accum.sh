#!/bin/bash
# dense_mgpu with an accumulator a K step and tile_regression with one a half of K, against
# main's forms (0365671, kept in .data/old/): checks against float64, then errors and times of
# both forms in one process. Checkout root, Hopper GPU; carry .data.
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000" | tee -a "$out/$name"; }
run check.txt 200 -m experiments.check_kernels --only=tile_regression,hopper
run accum.txt 330 docs/bench/2026-11-29d_rolled_and_accumulators/scripts/accum.py
