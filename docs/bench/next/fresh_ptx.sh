#!/bin/bash
# The PTX and ptxas' registers of the phase kernels' fresh-descriptor forms (FRESH_DESCRIPTORS,
# 2026-12-07), to read here with probes.spills whether the descriptors are now built in the
# step's loop. After phase_options.sh; checkout root, no data; about 3 minutes.
set -u
export PYTHONPATH=.
with="python3 docs/bench/next/with_constants.py"  # (a program: timeout runs it)
G=pallas_kernels.fused.grid_regression_mgpu T=pallas_kernels.fused.tile_regression_mgpu
M=pallas_kernels.fused.tile_mlp_mgpu
for k in grid_regression tile_regression tile_mlp; do
  rm -rf /tmp/fresh_$k && mkdir -p /tmp/fresh_$k
  if [ $k = tile_mlp ]; then run="docs/bench/next/dump_ptx.py tile_mlp"
  else run="probes.grid_regression --kernel=$k --repeats=1 --steps=101"; fi
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/fresh_$k timeout 90 \
    $with "$G.FRESH_DESCRIPTORS $T.FRESH_DESCRIPTORS $M.FRESH_DESCRIPTORS" $run > /dev/null 2>&1
  grep -h "registers\|spill" /tmp/fresh_$k/*.ptxas | sort -u | sed "s/^/$k fresh: /" \
    | tee -a $OUT/ptxas.txt
  f=$(ls /tmp/fresh_$k/*.ptx 2>/dev/null | head -1)
  [ -n "$f" ] && gzip -9 -c "$f" > $OUT/${k}_fresh.ptx.gz
done
ls -la $OUT
