#!/bin/bash
# #53: the least a dependent phase of a grid-barrier kernel costs on the H100, 128 CTAs (the tile
# regression kernel's): nine phases a step, each storing 16 KB a CTA (waited for), meeting at the
# grid barrier and loading 16 KB that other CTAs stored (probes.phase_stream); then the nine
# barriers alone. The tile kernel takes nine dependent phases and 37.5 us a step without its
# products (2026-12-07e): this says how much of that any nine-phase form must keep, and so how
# few phases 1.5x (42.8 us a step) needs. Checkout root, no data; about a minute.
set -u
export PYTHONPATH=.
N=16,16,16,16,16,16,16,16,16
Z=0,0,0,0,0,0,0,0,0
timeout 60 python3 -m probes.phase_stream --ctas=128 --in_kb=$N --out_kb=$N 2>&1 \
  | grep -v -i warn | tee $OUT/phase_latency.txt
timeout 60 python3 -m probes.phase_stream --ctas=128 --in_kb=$Z --out_kb=$Z 2>&1 \
  | grep -v -i warn | tee -a $OUT/phase_latency.txt
