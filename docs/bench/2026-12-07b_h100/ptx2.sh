#!/bin/bash
set -u
export PYTHONPATH=.
for k in grid_regression tile_regression; do
  rm -rf /tmp/fresh_$k && mkdir -p /tmp/fresh_$k
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/fresh_$k timeout 90 \
    python3 -m probes.grid_regression --kernel=$k --repeats=1 --steps=101 > /dev/null 2>&1
  grep -h "registers\|spill" /tmp/fresh_$k/*.ptxas | sort -u | sed "s/^/$k fresh: /" | tee -a $OUT/ptxas.txt
  f=$(ls /tmp/fresh_$k/*.ptx 2>/dev/null | head -1)
  [ -n "$f" ] && gzip -9 -c "$f" > $OUT/${k}_fresh.ptx.gz
done
for k in cluster_mlp logreg; do
  rm -rf /tmp/dump_$k && mkdir -p /tmp/dump_$k
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/dump_$k timeout 120 \
    python3 docs/bench/next/dump_ptx.py $k 2>&1 | grep -v -i warn | tail -1
  grep -h "registers\|spill" /tmp/dump_$k/*.ptxas | sort -u | sed "s/^/$k: /" | tee -a $OUT/ptxas.txt
  for f in /tmp/dump_$k/*.ptx; do [ -e "$f" ] && gzip -9 -c "$f" > $OUT/${k}_$(basename $f).gz; done
done
ls -la $OUT
