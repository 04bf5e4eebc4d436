#!/bin/bash
# #55: the streamed population kernel's step split on the H100 with its descriptors built in
# the walk (its default since 2026-12-07f): the walks alone and the output layer alone, at 64
# and 512 members, and each scope under Mosaic GPU's profiler at 64 (docs/design/populations.md:
# what bounds it; on an H200, 2026-11-29, the walks 37.7 and the output layer 21.4 us at 64).
# If the output layer is a third of the step, one member's under another member's walk (two
# members a CTA) is the route to 4x. Checkout root, no data; about 3-4 minutes.
set -u
export PYTHONPATH=.
timeout 300 python3 -u -m probes.stream_population --floor --members=64,512 2>&1 \
  | grep -v -i warn | tee $OUT/stream_floor.txt
timeout 200 python3 -u -m probes.stream_population --profile --members=64 2>&1 \
  | grep -v -i warn | tee $OUT/stream_profile.txt
