#!/bin/bash
# #53: the tile regression kernel with its weight operands fetched before the grid barriers
# (tile_regression_mgpu.EARLY_WEIGHTS, off by default): the same bits as the default and us a
# step alternating (tile_early.py), then check_kernels --only=tile_regression with it on. If the
# same bits, 4/4 and faster: make it the default (EARLY_WEIGHTS = True with the jax versions
# checked) and re-run the grid's point. Checkout root, no data; about 3 minutes (jax 0.11.2).
set -u
export PYTHONPATH=.
timeout 200 python3 -u docs/bench/2026-12-07h_h100/tile_early.py 2>&1 | grep -v -i warn \
  | tee $OUT/tile_early.txt
timeout 150 python3 docs/bench/next/with_constants.py \
  pallas_kernels.fused.tile_regression_mgpu.EARLY_WEIGHTS experiments.check_kernels \
  --only=tile_regression > $OUT/check_early.log 2>&1
echo "rc $?" >> $OUT/check_early.log
grep -h "passed\|failed\|rc " $OUT/check_early.log | tail -2
