#!/bin/bash
# #53, the 32-256-256-1 phase kernel (16.04 us a step on the H100 on 2026-12-07; 2x xla needs
# 13.9): barriers 1 and 2 among a row quarter's 16 CTAs instead of all 64. Checkout root,
# MNIST in .data (carry [".data"]); about 4 minutes.
set -u
export PYTHONPATH=.
timeout 120 python3 -u docs/bench/next/quarter_barriers.py 2>&1 | grep -v -i warn \
  | tee $OUT/quarter_barriers.txt
wrap() {  # module, args...: python -m module with QUARTER_BARRIERS on
  python3 -c "
import sys, runpy; from pallas_kernels.fused import grid_regression_mgpu as g
g.QUARTER_BARRIERS = True; sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name='__main__')" "$@"
}
timeout 90 wrap experiments.check_kernels --seed=7 --only=grid_regression \
  > $OUT/check_quarter.log 2>&1; echo "rc $?" >> $OUT/check_quarter.log
grep -h "passed\|failed\|rc " $OUT/check_quarter.log | tail -3
export JAXSHALLOW_DATA_DIR=$PWD/.data/data
timeout 150 wrap benchmarks.bench --grid --seeds=0 --plots=false \
  "--points=regression hidden 256-256" --out_dir=$OUT/grid_quarter > $OUT/grid_quarter.log 2>&1
grep -A3 "^| point" $OUT/grid_quarter/GRID.md
