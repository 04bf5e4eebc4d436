#!/bin/bash
# Which compile should start first in a cold run on the GPU (#54; log 2026-12-06e): the
# evaluation's (the trainer since c4225f5) or the training's (b24bac3), xla and pallas, the MLP
# and softmax regression, three rounds alternating, each with an empty cache. Checkout root,
# MNIST in .data (carry [".data"]); about 5 minutes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
TIMEFORMAT=%R
for i in 1 2 3; do for m in mlp logreg; do for impl in xla pallas; do
  for order in evaluation_first training_first; do
    rm -rf /tmp/cc
    w=$( { time ORDER=$order timeout 60 python3 docs/bench/next/cold_order.py --model=$m \
      --impl=$impl --compilation_cache=/tmp/cc > /tmp/run.log 2>&1; } 2>&1 )
    echo "$m $impl $order $i wall $w $(grep -o 'compile [0-9.]*s' /tmp/run.log)" \
      | tee -a $OUT/cold_order.txt
  done
done; done; done
