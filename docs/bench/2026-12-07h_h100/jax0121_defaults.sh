#!/bin/bash
# The defaults of 2026-12-07g on jax 0.12.1 (H100): the phase kernels' fresh descriptors
# (descriptors.CHECKED with (0, 12)), the tile regression kernel (tile_regression_mgpu.CHECKED)
# and the streamed population kernel (stream_population_mgpu.CHECKED, tentatively: kept only if
# it beats xla's networks/s here). jax0121_forms.sh checked their forms against float64 on 0.12.1
# with the constants set (2026-12-07g: 24/24). Here: the streamed kernel's two forms timed
# against each other on 0.12.1 (64 members), the grid's three phase-kernel points with the
# defaults (seed 0), and population_bench at 64 and 512 members, xla beside pallas' default.
# Before (here): set stream_population_mgpu.CHECKED to ((0, 11), (0, 12)) in the working tree
# (uncommitted; commit it only if the streamed kernel beats xla below); then calls with carry
# [".whl/part.aa"] .. [".whl/part.ad"], one a call, back to back: mkdir -p /tmp/w && cp
# .whl/part.* /tmp/w/ ; the last call, carry [".data", ".whl/part.ae"]: this script, about 7
# minutes.
set -u
mkdir -p /tmp/w && cp .whl/part.* /tmp/w/
if [ ! -d /tmp/j121 ]; then
  cat /tmp/w/part.* | tar xf - -C /tmp/w
  python3 -m pip install -q --no-deps --target /tmp/j121 /tmp/w/*.whl --compile
fi
export JAXSHALLOW_DATA_DIR=$PWD/.data/data PYTHONPATH=/tmp/j121:.
python3 -c "import jax; print(jax.__version__, jax.devices())" | tee $OUT/versions.txt
timeout 100 python3 -u docs/bench/2026-12-07f_h100/stream_fresh.py 64 2>&1 \
  | grep -v -i warn | tee $OUT/stream_fresh_0121.txt
timeout 150 python3 -m benchmarks.bench --grid --seeds=0 --plots=false \
  "--points=regression hidden 256-256,regression hidden 256-1024-256,mlp hidden 256-1024-256" \
  --out_dir=$OUT/grid_0121 > $OUT/grid_0121.log 2>&1
timeout 220 python3 -m benchmarks.population_bench --sizes=64,512 --impls=xla,pallas \
  --device_counts=1 --epochs=2 --dp_batch=0 --out=$OUT/pop_0121.json > $OUT/pop_0121.txt 2>&1
grep -A5 "^| point" $OUT/grid_0121/GRID.md
grep "networks/s" $OUT/pop_0121.txt
