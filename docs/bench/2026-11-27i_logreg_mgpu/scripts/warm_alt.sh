#!/bin/bash
# #54 on jax 0.12 (wheels installed in /tmp/site by run_012_logreg.sh): the MLP's whole
# `experiments.mnist` process, xla and pallas alternating, a cache each: one cold, then 7 warm.
export PYTHONPATH=/tmp/site:. JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
[ "$1" = keep ] || for i in xla pallas; do rm -rf /tmp/wa_$i; done
for r in 0 1 2 3 4 5 6 7; do for i in xla pallas; do
  t0=$(date +%s%N)
  python3 -m experiments.mnist --impl=$i --compilation_cache=/tmp/wa_$i > /tmp/wa_$i.log 2>&1
  t1=$(date +%s%N)
  echo "$r $i $(( (t1 - t0) / 1000000 )) ms $(grep -o 'compile [0-9.]*s' /tmp/wa_$i.log | tail -1)"
done; done | tee $OUT/warm_alt012.txt
python3 -c "import jax; print(jax.__version__)"
