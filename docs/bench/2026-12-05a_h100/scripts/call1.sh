#!/bin/bash
# Session 2026-12-05's first device call (checkout root, one H100, jax 0.11.2, logs under $OUT):
# 1. the MLP reference's cold run (an empty compilation cache each) with the cluster kernel in
#    Warpgroup semantics (jax 0.11's choice, cluster_mlp_mgpu.semantics) and in Lane (set from
#    outside for this measurement), and xla's, alternating, twice each;
# 2. a population of the reference MLP with each path forced, 64 and 512 members, one GPU;
# 3. the streamed kernel's checks on this GPU.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
python3 -c "import jax; print('jax', jax.__version__)" >> "$out/device.txt"
for round in 1 2; do
  for sem in Warpgroup Lane xla; do
    rm -rf /tmp/c_$sem; s=$(date +%s.%N)
    if [ $sem = xla ]; then
      python3 -m experiments.mnist --impl=xla --compilation_cache=/tmp/c_$sem 2>&1 | grep "done:" \
        | sed "s/^/$sem round $round: /" >> "$out/semantics.txt"
    else
      python3 -c "
import sys
from jax.experimental.pallas import mosaic_gpu as plgpu
from pallas_kernels.fused import cluster_mlp_mgpu as c
c.semantics = lambda: plgpu.LoweringSemantics.$sem
from experiments import mnist
from jaxshallow.run import cli
sys.argv = ['mnist', '--impl=pallas', '--compilation_cache=/tmp/c_$sem']
cli.run(mnist.main)" 2>&1 | grep "done:" | sed "s/^/$sem round $round: /" >> "$out/semantics.txt"
    fi
    awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "  wall %.2f s\n", b - a}' >> "$out/semantics.txt"
  done
done
cat "$out/semantics.txt"
timeout 300 python3 docs/bench/2026-12-05a_h100/scripts/paths_by_devices.py 64,512 1 2 \
  > "$out/paths.txt" 2>&1
cat "$out/paths.txt" | grep -v Warning
timeout 150 python3 -m experiments.check_kernels --only=stream_population > "$out/check_stream.txt" 2>&1
tail -5 "$out/check_stream.txt"
