#!/bin/bash
# #54 on the device's jax 0.11.2: the whole `experiments.mnist` process for the MLP and softmax
# regression, xla and pallas alternating, a cache each: one cold run, then 8 warm.
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
for m in mlp logreg; do
  for i in xla pallas; do rm -rf /tmp/wa_${m}_$i; done
  for r in 0 1 2 3 4 5 6 7 8; do for i in xla pallas; do
    t0=$(date +%s%N)
    python3 -m experiments.mnist --model=$m --impl=$i --compilation_cache=/tmp/wa_${m}_$i > /tmp/wa.log 2>&1
    t1=$(date +%s%N)
    echo "$m $r $i $(( (t1 - t0) / 1000000 )) ms $(grep -o 'compile [0-9.]*s' /tmp/wa.log | tail -1)"
  done; done
done | tee $OUT/warm_alt011.txt
