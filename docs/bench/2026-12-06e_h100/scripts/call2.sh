#!/bin/bash
# jax 0.11.2, H100. 1) The two regression phase kernels' PTX (for ptxas and the registers, read
# here) and step times (#53). 2) The kernels that scale pixels, the rest of call 1's check (its
# conv cases passed as far as it got, then its 200 s ran out). 3) Cold runs, xla and pallas alternating (#54),
# since the evaluation is traced once the training is lowered (b24bac3).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
for k in tile_regression grid_regression; do
  mkdir -p /tmp/ptx/$k
  MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=/tmp/ptx/$k timeout 75 \
    python3 -m probes.grid_regression --kernel=$k --repeats=5 > /tmp/ptx/probe_$k.log 2>&1
  grep -a -i "us a step\|Used [0-9]* reg\|spill" /tmp/ptx/probe_$k.log | head -20 > $OUT/probe_$k.txt
done
tar czf $OUT/ptx.tgz -C /tmp/ptx tile_regression grid_regression
timeout 180 python3 -m experiments.check_kernels --seed=7 --only=step,population,epoch \
  --epoch_cases=0:2 > $OUT/check_pixels.log 2>&1; echo "rc $?" >> $OUT/check_pixels.log
TIMEFORMAT=%R
for i in 1 2; do for m in logreg mlp; do for impl in xla pallas; do
  rm -rf /tmp/cc
  w=$( { time timeout 40 python3 -m experiments.mnist --model=$m --impl=$impl \
    --compilation_cache=/tmp/cc > /tmp/cold_${m}_${impl}_$i.log 2>&1; } 2>&1 )
  echo "$m $impl $i wall $w $(grep -o 'compile [0-9.]*s' /tmp/cold_${m}_${impl}_$i.log)" \
    >> $OUT/cold.txt
done; done; done
cat $OUT/probe_*.txt; ls -la $OUT; grep -h "FAIL\|rc " $OUT/check_pixels.log | tail; cat $OUT/cold.txt
