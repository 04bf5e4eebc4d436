#!/bin/bash
# #55, second of two calls (right after stream_ahead.sh, on the same warm machine): profiles of
# the default form and of AHEAD at 64 members (one step: the walk, each tile's prefetch and
# wait, the output layer's 24 us in nine parts); AHEAD's PTX (its walk unrolls six tiles, the
# default's two; ptxas spilled across unrolled tiles before, 2026-11-29), for probes.spills on
# any machine; and, if stream_ahead.sh's check passed and AHEAD was faster at both sizes (its
# outputs in /tmp/stream_ahead), the population bench's default paths with AHEAD on. MNIST in
# .data/data (carried); about 7 minutes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
with="python3 docs/bench/next/with_constants.py"
A=pallas_kernels.fused.stream_population_mgpu.AHEAD
timeout 90 python3 -m probes.stream_population --profile --members=64 2>&1 | grep -v -i warn \
  | tee $OUT/profile.txt
timeout 90 $with "$A" probes.stream_population --profile --members=64 2>&1 | grep -v -i warn \
  | tee $OUT/profile_ahead.txt
for at in store start; do
  mkdir -p $OUT/ptx_ahead_$at  # (the dump goes to stdout where its folder is missing)
  MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=$OUT/ptx_ahead_$at timeout 60 python3 - $at <<'PY' \
    > /dev/null 2>&1
import sys, jax
from probes import stream_population as p
from pallas_kernels.fused import stream_population_mgpu as k
jax.block_until_ready(k.train_steps(*p.problem(2, 1, False), ahead=sys.argv[1]))
PY
  ls $OUT/ptx_ahead_$at | head -3
done
faster() {  # AHEAD's median under base's at both sizes, in stream_ahead.sh's forms.txt
  python3 - /tmp/stream_ahead/forms.txt <<'PY'
import re, sys
rows = [dict(re.findall(r"(\w+) ([\d.]+)", l.split(":", 1)[1]))
        for l in open(sys.argv[1]) if "median of" in l]
sys.exit(0 if len(rows) == 2 and all(float(r["ahead"]) < float(r["base"]) for r in rows) else 1)
PY
}
if [ ! -f /tmp/stream_ahead/forms.txt ]; then
  echo "no /tmp/stream_ahead/forms.txt (a fresh machine): the population bench not run"
elif faster && grep -q "^rc 0" /tmp/stream_ahead/check_ahead.log; then
  timeout 200 $with "$A" benchmarks.population_bench --sizes=64,512 --impls=xla,pallas \
    --device_counts=1 --epochs=2 --dp_batch=0 --out=$OUT/pop.json > $OUT/pop.txt 2>&1
  tail -8 $OUT/pop.txt
else
  echo "AHEAD not faster at both sizes, or its check failed: the population bench not run"
fi
