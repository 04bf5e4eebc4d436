#!/bin/bash
# #53, the 32-256-256-1 phase kernel (16.05 us a step on the H100 on 2026-12-06f, 255 registers,
# 1156 bytes spilled; 2x xla needs 13.9): C's product accumulated by fewer rows at a time.
# Checkout root, no data, carry nothing; about 4 minutes.
set -u
export PYTHONPATH=.
timeout 130 python3 -u docs/bench/next/dw1_rows.py 2>&1 | grep -v -i warn | tee $OUT/dw1_rows.txt
for rows in 64; do  # (256's report: 2026-12-06f, call1/grid_regression_ptxas.txt)
  mkdir -p /tmp/ptx_$rows
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/ptx_$rows timeout 60 \
    python3 -c "
import sys, runpy; from pallas_kernels.fused import grid_regression_mgpu as g
g.DW1_ROWS = $rows; sys.argv = ['p', '--repeats=1', '--steps=101']
runpy.run_module('probes.grid_regression', run_name='__main__')" > $OUT/probe_$rows.log 2>&1
  grep -h "registers\|spill" /tmp/ptx_$rows/*.ptxas | head -4 | sed "s/^/rows $rows: /" \
    | tee -a $OUT/ptxas.txt
  f=$(ls /tmp/ptx_$rows/*.ptx | head -1); [ -n "$f" ] && gzip -9 -c "$f" > $OUT/gr_$rows.ptx.gz
done
# The 64-row form against float64 (check_kernels).
timeout 90 python3 -c "
import sys, runpy; from pallas_kernels.fused import grid_regression_mgpu as g
g.DW1_ROWS = 64; sys.argv = ['check_kernels', '--seed=7', '--only=grid_regression']
runpy.run_module('experiments.check_kernels', run_name='__main__')" > $OUT/check_64.log 2>&1
echo "rc $?" >> $OUT/check_64.log
grep -h "passed\|failed\|rc " $OUT/check_64.log | tail -3; cat $OUT/ptxas.txt
