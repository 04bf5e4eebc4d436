#!/bin/bash
# #53, 32-256-1024-256-1 (the tile kernel 1.22x in the grid on 2026-12-07 with its descriptors
# built in the loop, 54.0 us a step; 1.5x needs 42.8): each half of K in its own accumulator,
# its products while the next half lands (OVERLAP_HALVES, off). Timed against the default,
# checked against float64 with it on; then the grid's three phase-kernel points with seed 0
# (with OVERLAP_HALVES on only where it was faster and passed). Checkout root, MNIST in
# .data/data (carried); about 6 minutes (timeouts 400 s in all).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
with="python3 docs/bench/next/with_constants.py"  # (a program: timeout runs it)
O=pallas_kernels.fused.tile_regression_mgpu.OVERLAP_HALVES
timeout 120 python3 -u docs/bench/next/phase_options.py 2>&1 | grep -v -i warn \
  | tee $OUT/phase_options.txt
timeout 95 $with "$O" experiments.check_kernels --seed=7 --only=tile_regression \
  > $OUT/check_overlap.log 2>&1; echo "rc $?" >> $OUT/check_overlap.log
grep -h "passed\|failed\|rc " $OUT/check_overlap.log | tail -2
on=""
if grep -q "faster: overlap_halves" $OUT/phase_options.txt && grep -q "^rc 0" $OUT/check_overlap.log
then on="$O"; fi
echo "grid with: ${on:-the defaults}" | tee $OUT/grid_with.txt
timeout 185 $with "$on" benchmarks.bench --grid --seeds=0 --alternatives --plots=false \
  "--points=regression hidden 256-256,regression hidden 256-1024-256,mlp hidden 256-1024-256" \
  --out_dir=$OUT/grid > $OUT/grid.txt 2>&1; echo "rc $?" >> $OUT/grid.txt
grep -v -i "warn\|^W1\|^I1" $OUT/grid.txt | tail -6
