#!/bin/bash
# Call 9: time to a trained network, the MLP (cold, then 3 warm), xla and pallas, after the
# cluster kernel's one traced step.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 250 python3 -m benchmarks.end_to_end --workloads=mlp --out_dir=$OUT/e2e > $OUT/e2e.log 2>&1; echo "rc $?"
grep "^|" $OUT/e2e/END_TO_END*.md | head -8
