#!/bin/bash
# #54: softmax regression's and the MLP's warm runs phase by phase, pallas and xla (H100, 0.11.2).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
for m in logreg mlp; do for i in xla pallas; do
  d=/tmp/cache_${m}_${i}; rm -rf $d
  python3 .device/warm_probe2.py $i $m $d 2>&1 | grep -v "^W\|^I0" | sed 's/^/cold /'
  for r in 1 2 3; do python3 .device/warm_probe2.py $i $m $d 2>&1 | grep -v "^W\|^I0"; done
done; done | tee $OUT/warm2.txt
python3 -X importtime .device/warm_probe2.py pallas logreg /tmp/cache_logreg_pallas 2> $OUT/importtime_logreg_pallas.txt | tail -1
python3 -X importtime .device/warm_probe2.py xla logreg /tmp/cache_logreg_xla 2> $OUT/importtime_logreg_xla.txt | tail -1
sort -t'|' -k2 -n -r $OUT/importtime_logreg_pallas.txt | head -12
