#!/bin/bash
# #54: the one-cluster MLP kernel's floor at float32 (and tf32, bfloat16): its step, its step
# without the two exchanges, the exchanges alone (probes.cluster_floor); on the device's jax
# 0.11.2 and, where jax0121_forms.sh left jax 0.12.1 installed in /tmp/j121 (the same warm
# machine, the call right after it), on 0.12.1 too. 4.5x xla on jax 0.12.1 needs about 6.06 us
# a step (xla 25.57 ms an epoch there, 2026-12-06f); a floor above it says the target is out of
# this design's reach there. Then (#53) probes.l2_fetch: 64 and 128 CTAs fetching 0-192 KiB
# each a step from L2 and meeting at the grid barrier, what the tile regression kernel's
# product phases fetch (docs/bench/2026-12-07e_h100: is its step L2-bound?). Checkout root, no
# data; about 3 minutes a version, then 1-2 minutes.
set -u
timeout 200 env PYTHONPATH=. python3 -u -m probes.cluster_floor \
  --precisions=float32,tf32,bfloat16 2>&1 | grep -v -i warn | tee $OUT/floor_0112.txt
if [ -d /tmp/j121 ]; then
  timeout 200 env PYTHONPATH=/tmp/j121:. python3 -u -m probes.cluster_floor \
    --precisions=float32,tf32,bfloat16 2>&1 | grep -v -i warn | tee $OUT/floor_0121.txt
fi
timeout 150 env PYTHONPATH=. python3 -u -m probes.l2_fetch --ctas=64,128 --kib=0,48,96,192 \
  2>&1 | grep -v -i warn | tee $OUT/l2_fetch.txt
