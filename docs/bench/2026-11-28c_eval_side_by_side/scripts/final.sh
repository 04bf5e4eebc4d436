#!/bin/bash
# The last of four back-to-back calls that carried jax 0.12.0.1's wheels (and jax-triton 0.3.1)
# to /tmp/w12 (.device/p0..p3, ignored): install them, then on jax 0.12 the Triton twins'
# checks and the CNN's cold and warm walls; then on the image's jax 0.11.2 two more rounds of
# cold and warm walls of the three workloads (one warm run each), for the spread of one cold run.
export JAXSHALLOW_DATA_DIR=$PWD/.data
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
cp .device/p3/* /tmp/w12/
cat /tmp/w12/part_* > /tmp/w12.tar && mkdir -p /tmp/whl && tar xf /tmp/w12.tar -C /tmp/whl
pip install -q --no-deps --target /tmp/site /tmp/whl/*.whl /tmp/w12/jax_triton-*.whl \
  > $OUT/install.log 2>&1
P12=/tmp/site:$PWD
PYTHONPATH=$P12 timeout 240 python -u -m experiments.check_kernels --only=triton --seed=7 \
  > $OUT/check_triton_012.log 2>&1
PYTHONPATH=$P12 timeout 120 python -u -m benchmarks.end_to_end --workloads=cnn --warm_runs=1 \
  --out_dir=/tmp/e2e012 > $OUT/e2e012.log 2>&1
cp /tmp/e2e012/end_to_end.json $OUT/e2e012.json
for r in 1 2; do
  PYTHONPATH=$PWD timeout 170 python -u -m benchmarks.end_to_end --workloads=mlp,cnn,logreg \
    --warm_runs=1 --out_dir=/tmp/e2e011_r$r > $OUT/e2e011_r$r.log 2>&1
  cp /tmp/e2e011_r$r/end_to_end.json $OUT/e2e011_r$r.json
done
tail -n 2 $OUT/check_triton_012.log; grep -E "^(mlp|cnn|logreg) " $OUT/e2e*.log
