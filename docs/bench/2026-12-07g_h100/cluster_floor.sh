#!/bin/bash
# #54: the one-cluster MLP kernel's floor at float32 (and tf32, bfloat16): its step, its step
# without the two exchanges, the exchanges alone (probes.cluster_floor); on the device's jax
# 0.11.2 and, where jax0121_forms.sh left jax 0.12.1 installed in /tmp/j121 (the same warm
# machine, the call right after it), on 0.12.1 too. 4.5x xla on jax 0.12.1 needs about 6.06 us
# a step (xla 25.57 ms an epoch there, 2026-12-06f); a floor above it says the target is out of
# this design's reach there. Then (#53) probes.phase_stream with the tile regression kernel's
# volumes (its product phases B, C, F, G read 192, 96, 208 and 208 KB a CTA, here 192 at most;
# docs/bench/2026-12-07e_h100), 64 and 128 CTAs, and the barriers alone: is its step bound by
# L2 (64 CTAs read 7.6 TB/s together on 2026-11-28, a CTA about 120 GB/s)? Checkout root, no
# data; about 3 minutes a version, then 1-2 minutes.
set -u
timeout 200 env PYTHONPATH=. python3 -u -m probes.cluster_floor \
  --precisions=float32,tf32,bfloat16 2>&1 | grep -v -i warn | tee $OUT/floor_0112.txt
if [ -d /tmp/j121 ]; then
  timeout 200 env PYTHONPATH=/tmp/j121:. python3 -u -m probes.cluster_floor \
    --precisions=float32,tf32,bfloat16 2>&1 | grep -v -i warn | tee $OUT/floor_0121.txt
fi
for v in "192,96,192,192 8,8,8,8" "0,0,0,0 0,0,0,0"; do
  set -- $v
  timeout 70 env PYTHONPATH=. python3 -u -m probes.phase_stream --ctas=64,128 --in_kb=$1 \
    --out_kb=$2 2>&1 | grep -v -i warn | tee -a $OUT/phase_stream.txt
done
