#!/bin/bash
# Softmax regression's population with members sharing a seed's batches (H100, jax 0.11.2):
# check_kernels --only=logreg (with the 2-sets case), then a sweep of 8 seeds x 8 lrs, xla and
# pallas, 2 epochs: networks/s.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 100 python3 -m experiments.check_kernels --only=logreg --seed=11 > $OUT/check_logreg_sets.log 2>&1; echo "check rc $?"; grep -E "FAIL|passed|sets" $OUT/check_logreg_sets.log | tail -4
for i in xla pallas; do
  timeout 120 python3 -m experiments.sweep --model=logreg --impl=$i --seeds=0-7 --lrs=0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4 --epochs=2 --out=$OUT/sweep_$i.json > $OUT/sweep_$i.log 2>&1; echo "$i rc $?"
  python3 -c "import json; r=json.load(open('$OUT/sweep_$i.json')); print('$i', {k: r[k] for k in r if k in ('train_time_s','compile_time_s','networks_per_second','path')})" 2>&1 | tail -1
done
