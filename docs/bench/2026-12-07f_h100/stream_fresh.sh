#!/bin/bash
# #55: the streamed population kernel (64 members 2.12x xla's networks/s on the H100, 512 members
# 1.79x, 2026-12-05) with each product's wgmma descriptors built where it runs (the phase
# kernels' steps fell 2-29 % with it, 2026-12-07b; this kernel's PTX held 28 descriptors
# across its walk at 255 registers and spilled 128 B). Timed against the default at 64 and
# 512 members, checked with it on; then, if it was faster and passed, the population bench's
# default paths with it on. Checkout root, MNIST in .data/data (carried); about 9 minutes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
with="python3 docs/bench/next/with_constants.py"
S=pallas_kernels.fused.stream_population_mgpu.FRESH_DESCRIPTORS
timeout 200 python3 -u docs/bench/2026-12-07f_h100/stream_fresh.py 64 512 2>&1 | grep -v -i warn \
  | tee $OUT/stream_fresh.txt
for form in fresh; do  # ptxas' report (the folder must exist; the default's: ../2026-12-07_ptx)
  rm -rf /tmp/ptxas_$form && mkdir -p /tmp/ptxas_$form
  MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=/tmp/ptxas_$form timeout 60 \
    python3 docs/bench/2026-12-07f_h100/stream_fresh.py dump $form > /dev/null 2>&1
  grep -h "registers\|spill" /tmp/ptxas_$form/*.ptxas | sort -u | sed "s/^/$form: /" \
    | tee -a $OUT/ptxas.txt
done
timeout 120 $with "$S" experiments.check_kernels --only=stream_population \
  > $OUT/check_fresh.log 2>&1; echo "rc $?" >> $OUT/check_fresh.log
grep -h "passed\|failed\|rc " $OUT/check_fresh.log | tail -2
if grep -q "stream faster: fresh_descriptors" $OUT/stream_fresh.txt \
   && grep -q "^rc 0" $OUT/check_fresh.log; then
  timeout 200 $with "$S" benchmarks.population_bench --sizes=64,512 --impls=xla,pallas \
    --device_counts=1 --epochs=2 --dp_batch=0 --out=$OUT/pop.json > $OUT/pop.txt 2>&1
  tail -8 $OUT/pop.txt
fi
