#!/bin/bash
# #55: the streamed population kernel with two of W0's tiles in flight a warpgroup (AHEAD: W0's
# tiles in three slots, x's shared by the warpgroups in two; tile k + 2 fetched once tile k's
# store is issued, or, ahead_start, when tile k starts), alone and with odd steps walking in
# reverse. Walking in reverse alone left the step as it was (61.58 against 61.60 us at 64
# members, 2026-12-08): by inference each tile's chain holds the walk, not its copies' rate.
# First the check with AHEAD on (12 cases, float64 bounds, the same bits twice); then the forms
# alternating in one process (probes.stream_population --forms: each checked against the twin
# and against base's bits; 3 rounds); then profiles of the default form's and AHEAD's scopes at
# 64 members (the walk, and the output layer's 24 us in nine parts; one step); then, if AHEAD passed and was faster at both sizes, the
# population bench's default paths with it on. Checkout root, MNIST in .data/data (carried);
# about 9 minutes. Prepared 2026-12-08 (second session; CPU only: no device lent).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
with="python3 docs/bench/next/with_constants.py"
A=pallas_kernels.fused.stream_population_mgpu.AHEAD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 -c "import jax; print('jax', jax.__version__)" | tee -a $OUT/device.txt
timeout 150 $with "$A" experiments.check_kernels --only=stream_population \
  > $OUT/check_ahead.log 2>&1; echo "rc $?" >> $OUT/check_ahead.log
grep -h "passed\|failed\|rc " $OUT/check_ahead.log | tail -2
timeout 330 python3 -m probes.stream_population --forms=base,ahead,ahead_start,ahead_reversed \
  --members=64,512 --rounds=3 2>&1 | grep -v -i warn | tee $OUT/forms.txt
timeout 90 python3 -m probes.stream_population --profile --members=64 2>&1 | grep -v -i warn \
  | tee $OUT/profile.txt
timeout 90 $with "$A" probes.stream_population --profile --members=64 2>&1 | grep -v -i warn \
  | tee $OUT/profile_ahead.txt
# AHEAD's PTX (its walk unrolls six tiles, where the default's unrolls two; ptxas spilled
# across unrolled tiles before, 2026-11-29): read with probes.spills on any machine
for at in store start; do
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=$OUT/ptx_ahead_$at timeout 60 python3 - $at <<'PY' \
    > /dev/null 2>&1
import sys, jax
from probes import stream_population as p
from pallas_kernels.fused import stream_population_mgpu as k
jax.block_until_ready(k.train_steps(*p.problem(2, 1, False), ahead=sys.argv[1]))
PY
  ls $OUT/ptx_ahead_$at | head -3
done
faster() {  # ahead's median under base's at both sizes
  python3 - $OUT/forms.txt <<'PY'
import re, sys
rows = [dict(re.findall(r"(\w+) ([\d.]+)", l.split(":", 1)[1]))
        for l in open(sys.argv[1]) if "median of" in l]
sys.exit(0 if len(rows) == 2 and all(float(r["ahead"]) < float(r["base"]) for r in rows) else 1)
PY
}
if faster && grep -q "^rc 0" $OUT/check_ahead.log; then
  timeout 200 $with "$A" benchmarks.population_bench --sizes=64,512 --impls=xla,pallas \
    --device_counts=1 --epochs=2 --dp_batch=0 --out=$OUT/pop.json > $OUT/pop.txt 2>&1
  tail -8 $OUT/pop.txt
fi
