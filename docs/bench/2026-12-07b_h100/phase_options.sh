#!/bin/bash
# #53, the regression phase kernels (32-256-256-1 16.04 us a step on 2026-12-07, 2x needs 13.9;
# 32-256-1024-256-1 67-69, 1.5x needs 42.8): the forms prepared on 2026-12-07 (barriers by row
# quarter; wgmma descriptors built where each product runs, not hoisted and spilled), timed
# against the defaults, and the checks against float64 with each module constant on (the tile
# MLP kernel's the same). Their PTX: fresh_ptx.sh. Checkout root, no data, carry nothing; about
# 6 minutes (timeouts 460 s in all).
set -u
export PYTHONPATH=.
timeout 220 python3 -u docs/bench/next/phase_options.py 2>&1 | grep -v -i warn \
  | tee $OUT/phase_options.txt
with="python3 docs/bench/next/with_constants.py"  # (a program: timeout runs it)
G=pallas_kernels.fused.grid_regression_mgpu T=pallas_kernels.fused.tile_regression_mgpu
M=pallas_kernels.fused.tile_mlp_mgpu
on="$G.QUARTER_BARRIERS $G.FRESH_DESCRIPTORS $T.FRESH_DESCRIPTORS $M.FRESH_DESCRIPTORS"
timeout 240 $with "$on" \
  experiments.check_kernels --seed=7 --only=grid_regression,tile_regression,tile_mlp \
  > $OUT/check_options.log 2>&1; echo "rc $?" >> $OUT/check_options.log
grep -h "passed\|failed\|rc " $OUT/check_options.log | tail -3
