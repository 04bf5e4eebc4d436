#!/bin/bash
# softmax regression end to end (cold, then 3 warm) with its one-CTA kernel; H100, jax 0.11.2.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 400 python3 -m benchmarks.end_to_end --workloads=logreg --out_dir=$OUT/e2e > $OUT/e2e.log 2>&1; echo "e2e rc $?"
tail -8 $OUT/e2e.log
timeout 100 python3 -m experiments.mnist --model=logreg --impl=pallas --precision=bfloat16 --compilation_cache=off 2>&1 | grep -v "^W\|^I0" | tail -4
