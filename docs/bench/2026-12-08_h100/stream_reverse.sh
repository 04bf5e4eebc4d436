#!/bin/bash
# #55: odd steps walking W0's tiles last to first, so that the tiles a step wrote last are the
# next step's first while still in L2 (64 members' W0, 54 MB, is about the L2's 50 MB: a walk
# in one order evicts every tile before the next reads it; the walks stream at 2.3 TB/s,
# 2026-12-07d; 512 members train in waves of about 64, each the same). First the copies alone
# (probes.weight_stream --products=false, 128 CTAs of half a member's W0), each order; then
# the kernel's two forms alternating in one process (stream_reverse.py), the check with the
# form on, and, if it was faster and passed, the population bench's default paths with it on.
# Checkout root, MNIST in .data/data (carried); about 6 minutes. Ran on main at daadfbc, whose
# kernel had REVERSE_ODD; it left the kernel since: apply reverse_odd.patch first.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
with="python3 docs/bench/next/with_constants.py"
S=pallas_kernels.fused.stream_population_mgpu.REVERSE_ODD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
for rev in false true; do
  timeout 100 python3 -m probes.weight_stream --products=false --ctas=128 --rows=832 \
    --reverse=$rev 2>&1 | grep -v -i warn | tee -a $OUT/copies.txt
done
timeout 200 python3 -u docs/bench/2026-12-08_h100/stream_reverse.py 64 512 2>&1 | grep -v -i warn \
  | tee $OUT/stream_reverse.txt
timeout 120 $with "$S" experiments.check_kernels --only=stream_population \
  > $OUT/check_reverse.log 2>&1; echo "rc $?" >> $OUT/check_reverse.log
grep -h "passed\|failed\|rc " $OUT/check_reverse.log | tail -2
if grep -q "stream faster: reverse_odd" $OUT/stream_reverse.txt \
   && grep -q "^rc 0" $OUT/check_reverse.log; then
  timeout 200 $with "$S" benchmarks.population_bench --sizes=64,512 --impls=xla,pallas \
    --device_counts=1 --epochs=2 --dp_batch=0 --out=$OUT/pop.json > $OUT/pop.txt 2>&1
  tail -8 $OUT/pop.txt
fi
