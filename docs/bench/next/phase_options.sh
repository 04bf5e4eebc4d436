#!/bin/bash
# #53, the regression phase kernels (32-256-256-1 16.04 us a step on 2026-12-07, 2x needs 13.9;
# 32-256-1024-256-1 67-69, 1.5x needs 42.8): the forms prepared on 2026-12-07 (barriers by row
# quarter; wgmma descriptors computed where each product runs, not hoisted and spilled), timed
# against the defaults, ptxas' registers of the fresh forms, and the checks against float64 with
# each module constant on (and the tile MLP kernel's the same). Checkout root, no data, carry
# nothing; about 8 minutes.
set -u
export PYTHONPATH=.
timeout 280 python3 -u docs/bench/next/phase_options.py 2>&1 | grep -v -i warn \
  | tee $OUT/phase_options.txt
with="python3 docs/bench/next/with_constants.py"  # (a program: timeout runs it)
G=pallas_kernels.fused.grid_regression_mgpu T=pallas_kernels.fused.tile_regression_mgpu
M=pallas_kernels.fused.tile_mlp_mgpu
for k in grid_regression tile_regression; do
  mkdir -p /tmp/ptx_$k
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/ptx_$k timeout 90 \
    $with "$G.FRESH_DESCRIPTORS $T.FRESH_DESCRIPTORS" probes.grid_regression --kernel=$k \
    --repeats=1 --steps=101 > /dev/null 2>&1
  grep -h "registers\|spill" /tmp/ptx_$k/*.ptxas | sort -u | sed "s/^/$k fresh: /" \
    | tee -a $OUT/ptxas.txt
  f=$(ls /tmp/ptx_$k/*.ptx | head -1); [ -n "$f" ] && gzip -9 -c "$f" > $OUT/${k}_fresh.ptx.gz
done  # (here: python -m probes.spills --ptx=... says where the descriptors are built)
mkdir -p /tmp/ptx_tile_mlp
MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/ptx_tile_mlp timeout 90 \
  $with "$M.FRESH_DESCRIPTORS" docs/bench/next/dump_ptx.py tile_mlp > /dev/null 2>&1
grep -h "registers\|spill" /tmp/ptx_tile_mlp/*.ptxas | sort -u | sed "s/^/tile_mlp fresh: /" \
  | tee -a $OUT/ptxas.txt
f=$(ls /tmp/ptx_tile_mlp/*.ptx | head -1)
[ -n "$f" ] && gzip -9 -c "$f" > $OUT/tile_mlp_fresh.ptx.gz
on="$G.QUARTER_BARRIERS $G.FRESH_DESCRIPTORS $T.FRESH_DESCRIPTORS $M.FRESH_DESCRIPTORS"
timeout 200 $with "$on" \
  experiments.check_kernels --seed=7 --only=grid_regression,tile_regression,tile_mlp \
  > $OUT/check_options.log 2>&1; echo "rc $?" >> $OUT/check_options.log
grep -h "passed\|failed\|rc " $OUT/check_options.log | tail -3
