#!/bin/bash
# Session 2026-12-05's fourth device call (checkout root, one H100, jax 0.11.2, logs under
# $OUT): the streamed kernel against a cluster a member at 128 and 256 members (forced), then the
# default paths as a user gets them (population_bench; the streamed kernel at 64 and 512 on the
# H100 since this session's first call).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
out=${OUT:-/tmp/out}
timeout 200 python3 docs/bench/2026-12-05a_h100/scripts/paths_by_devices.py 128,256 1 2 \
  cluster,stream > "$out/paths_128_256.txt" 2>&1
grep -v Warning "$out/paths_128_256.txt"
timeout 330 python3 -m benchmarks.population_bench --sizes=1,8,64,512 --impls=xla,pallas \
  --device_counts=1 --epochs=2 --dp_batch=0 --out="$out/pop.json" --plot="$out/pop.png" \
  > "$out/pop.txt" 2>&1
grep -v "Warning\|^W1\|^I1" "$out/pop.txt" | tail -20
