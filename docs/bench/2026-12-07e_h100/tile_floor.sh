#!/bin/bash
# #53, 32-256-1024-256-1: what the tile kernel's step costs without its products, with 1 and 3
# of its 6 products of parts, and with every product on the first parts (all parts fetched,
# or only those), now that its wgmma descriptors are built in the loop (52.5-54.0 us a step on
# 2026-12-07; 35.7 without products and 41.5 / 57.3 with 1 / 3 of 6 on 2026-12-06c, when it
# spilled). Checkout root, no data, carry nothing; about 4-6 minutes.
set -u
export PYTHONPATH=.
timeout 400 python3 -u -m probes.grid_regression --kernel=tile_regression --floor --fetches \
  --repeats=5 --steps=600 2>&1 | grep -v -i warn | tee $OUT/floor.txt
