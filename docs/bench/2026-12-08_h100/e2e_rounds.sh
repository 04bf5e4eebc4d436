#!/bin/bash
# #54's verdict by rounds: benchmarks.end_to_end --rounds=3 (the MLP, CNN and softmax regression,
# xla and pallas, a cold and two warm processes a round, the impls' order reversed every other
# round), jax 0.11.2 on the H100. One run a cell (2026-12-07h) left pallas 0.03-0.17 s behind in
# 4 of 12 pairs, closer than rounds differ. MNIST carried (carry [".data"]); about 5 minutes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
timeout 470 python3 -m benchmarks.end_to_end --rounds=3 --warm_runs=2 --out_dir=$OUT/e2e_rounds \
  > $OUT/e2e_rounds.log 2>&1
echo "rc $?"
tail -12 $OUT/e2e_rounds/END_TO_END.md
