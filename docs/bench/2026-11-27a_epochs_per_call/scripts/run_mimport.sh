#!/bin/bash
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 120 python3 -m experiments.mnist --impl=pallas --epochs=2 --compilation_cache=/tmp/cc_mi 2>&1 | tail -1
i=0
for m in jax._src.lib.mosaic_gpu jax.experimental.mosaic.gpu jax.experimental.pallas.mosaic_gpu none jax._src.lib.mosaic_gpu; do
  i=$((i+1)); rm -rf /tmp/cc_$i; cp -r /tmp/cc_mi /tmp/cc_$i
  timeout 120 python3 .device/mosaic_import.py $m /tmp/cc_$i 2>&1 | grep -E "IMPORT|usable|done" | cut -c1-220
done
