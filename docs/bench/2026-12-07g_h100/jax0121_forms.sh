#!/bin/bash
# The phase kernels' forms of 2026-12-07 (wgmma descriptors built in the loop; 32-256-256-1's
# barriers 1-2 by row quarter), and the streamed population kernel's (its descriptors built in
# the walk, 2026-12-07f), on jax 0.12.1, where they are off until checked on a GPU
# (pallas_kernels/mgpu/descriptors.CHECKED: jax 0.11 only): the checks against float64 with
# them on, their us a step against the forms of before (docs/bench/2026-12-07b_h100's
# phase_options.py), and the grid's three phase-kernel points with them on. If all pass and
# are faster: add (0, 12) to descriptors.CHECKED (and 0.12 to tile_regression_mgpu.CHECKED if
# the tile kernel beats xla there).
#
# Before (here): jax 0.12.1's four cp312 wheels in .whl/part.* (docs/bench/2026-12-06f_h100/
# scripts/jax0121.sh says how); calls 1..N-1 back to back, carry [".whl/part.aa"] and so on,
# one a call: mkdir -p /tmp/w && cp .whl/part.* /tmp/w/
# Last call (carry [".data", ".whl/part.<last>"]): this script, about 8 minutes.
set -u
mkdir -p /tmp/w && cp .whl/part.* /tmp/w/
cat /tmp/w/part.* | tar xf - -C /tmp/w
python3 -m pip install -q --no-deps --target /tmp/j121 /tmp/w/*.whl --compile
export JAXSHALLOW_DATA_DIR=$PWD/.data/data
J121="env PYTHONPATH=/tmp/j121:."
with="docs/bench/next/with_constants.py"
G=pallas_kernels.fused.grid_regression_mgpu T=pallas_kernels.fused.tile_regression_mgpu
M=pallas_kernels.fused.tile_mlp_mgpu S=pallas_kernels.fused.stream_population_mgpu
on="$G.QUARTER_BARRIERS $G.FRESH_DESCRIPTORS $T.FRESH_DESCRIPTORS $M.FRESH_DESCRIPTORS"
on="$on $S.FRESH_DESCRIPTORS"
$J121 python3 -c "import jax; print(jax.__version__, jax.devices())" | tee $OUT/versions.txt
timeout 240 $J121 python3 $with "$on" experiments.check_kernels --seed=7 \
  --only=grid_regression,tile_regression,tile_mlp,stream_population \
  > $OUT/check_forms_0121.log 2>&1
echo "rc $?" >> $OUT/check_forms_0121.log
timeout 150 $J121 python3 -u docs/bench/2026-12-07b_h100/phase_options.py 2>&1 \
  | grep -v -i warn | tee $OUT/phase_options_0121.txt
timeout 150 $J121 python3 $with "$on" benchmarks.bench --grid --seeds=0 \
  --plots=false \
  "--points=regression hidden 256-256,regression hidden 256-1024-256,mlp hidden 256-1024-256" \
  --out_dir=$OUT/grid_0121 > $OUT/grid_0121.log 2>&1
grep -h "passed\|failed\|rc " $OUT/check_forms_0121.log | tail -3
grep -A5 "^| point" $OUT/grid_0121/GRID.md
