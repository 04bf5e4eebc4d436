#!/bin/bash
# #55, first of two calls: the streamed population kernel with two of W0's tiles in flight a
# warpgroup (AHEAD: W0's tiles in three slots, x's shared by the warpgroups in two; tile k + 2
# fetched once tile k's store is issued, or, ahead_start, when tile k starts), alone and with
# odd steps walking in reverse. Walking in reverse alone left the step as it was (61.58 against
# 61.60 us at 64 members, 2026-12-08): by inference each tile's chain holds the walk, not its
# copies' rate. The check with AHEAD on (12 cases, float64 bounds, the same bits twice); then
# the forms alternating in one process (probes.stream_population --forms: each checked against
# the twin and against base's bits; 3 rounds) at 64 and 512 members. Both outputs are also
# kept in /tmp/stream_ahead for stream_ahead_more.sh, the next call on the warm machine.
# Checkout root; about 7 minutes. Prepared 2026-12-08 (second session; no device lent).
set -u
export PYTHONPATH=.
with="python3 docs/bench/next/with_constants.py"
A=pallas_kernels.fused.stream_population_mgpu.AHEAD
mkdir -p /tmp/stream_ahead
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 -c "import jax; print('jax', jax.__version__)" | tee -a $OUT/device.txt
timeout 150 $with "$A" experiments.check_kernels --only=stream_population \
  > $OUT/check_ahead.log 2>&1; echo "rc $?" >> $OUT/check_ahead.log
grep -h "passed\|failed\|rc " $OUT/check_ahead.log | tail -2
timeout 330 python3 -m probes.stream_population --forms=base,ahead,ahead_start,ahead_reversed \
  --members=64,512 --rounds=3 2>&1 | grep -v -i warn | tee $OUT/forms.txt
cp $OUT/check_ahead.log $OUT/forms.txt /tmp/stream_ahead/
