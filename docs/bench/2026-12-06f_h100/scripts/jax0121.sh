#!/bin/bash
# jax 0.12.1 on the H100 (issue #54's "fast path on jax 0.12", #58's "the next jax"), and the
# pixels' new scaling (a float32 product by 1/255 since 2026-12-06d) on the device's jax 0.11.2.
#
# Before (here): the four cp312 wheels, tarred and split under 60 MiB in the ignored .whl/:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_27_x86_64 -d /tmp/w jax==0.12.1 jaxlib==0.12.1 \
#     jax-cuda13-plugin==0.12.1 jax-cuda13-pjrt==0.12.1
#   tar cf - -C /tmp/w . | split -b 48M - .whl/part.
# (five parts, the last 24 MiB: what travels, the checkout's 8.5 MiB, the part and .data's 11
# MiB, must stay under 64 MiB.)
# Calls 1..N-1 (back to back, carry [".whl/part.aa"] and so on, one a call, each well under a
# second): mkdir -p /tmp/w && cp .whl/part.* /tmp/w/
# Last call (carry [".data", ".whl/part.<last>"]): this script, about 7 minutes.
set -u
mkdir -p /tmp/w && cp .whl/part.* /tmp/w/
cat /tmp/w/part.* | tar xf - -C /tmp/w
python3 -m pip install -q --no-deps --target /tmp/j121 /tmp/w/*.whl --compile
export PYTHONPATH=.
J121="env PYTHONPATH=/tmp/j121:."
$J121 python3 -c "import jax; print(jax.__version__, jax.devices())" | tee $OUT/versions.txt
# 1. The Mosaic GPU kernels on jax 0.12.1 (every group the trainer takes on Hopper).
timeout 240 $J121 python3 -m experiments.check_kernels --seed=7 \
  --only=cluster_mlp,cluster,logreg,grid_regression,tile_mlp,tile_regression,stream_population \
  > $OUT/check_mgpu_0121.log 2>&1; echo "rc $?" >> $OUT/check_mgpu_0121.log
# 2. The reference rows on both versions, one process each.
for v in 0121 0112; do
  run=$([ $v = 0121 ] && echo "$J121" || echo env)
  timeout 120 $run python3 -m benchmarks.bench --grid --seeds=0 --plots=false \
    --points="mlp reference,softmax regression,cnn reference" --out_dir=$OUT/grid_$v \
    > $OUT/grid_$v.log 2>&1
done
grep -h "passed\|failed\|rc " $OUT/*.log | tail -20
for v in 0121 0112; do grep -A6 "^| point" $OUT/grid_$v/GRID.md; done
