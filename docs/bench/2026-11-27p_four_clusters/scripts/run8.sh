#!/bin/bash
# Float64 parity of the four-cluster forms (one epoch, seeds 0-2, lockstep).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
for b in 512 256; do
  timeout 140 python3 -m experiments.parity --reference=float64 --seeds=0,1,2 --epochs=1 "--point=mlp batch $b" > $OUT/parity_mlp_batch_$b.log 2>&1; echo "parity $b rc $?"
  grep -v "^W1\|^I1" $OUT/parity_mlp_batch_$b.log | tail -6
done
