#!/bin/bash
# The PTX of the Hopper epoch kernels not yet read for hoisted wgmma descriptors (2026-12-07:
# the phase kernels' were their whole register pressure, docs/bench/2026-12-07_ptx): the MLP's
# cluster kernel (issue #54: 3.89x on jax 0.12.1, 4.5x asked), the tile MLP kernel, softmax
# regression's. No data; about 2 minutes.
set -u
export PYTHONPATH=.
for k in cluster_mlp tile_mlp logreg; do
  rm -rf /tmp/dump_$k && mkdir -p /tmp/dump_$k
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/dump_$k timeout 120 \
    python3 docs/bench/next/dump_ptx.py $k 2>&1 | grep -v -i warn | tail -1
  grep -h "registers\|spill" /tmp/dump_$k/*.ptxas | sort -u | sed "s/^/$k: /" | tee -a $OUT/ptxas.txt
  for f in /tmp/dump_$k/*.ptx; do
    [ -e "$f" ] && gzip -9 -c "$f" > $OUT/${k}_$(basename $f).gz
  done
done
ls -la $OUT
