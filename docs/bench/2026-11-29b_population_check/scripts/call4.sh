#!/bin/bash
# Session 2026-11-29b's fourth device call (checkout root, Hopper GPU, jax 0.11.2, logs under
# $OUT): the MLP reference's cold run (an empty compilation cache each) with the cluster kernel
# in Warpgroup semantics (jax 0.11's choice, cluster_mlp_mgpu.semantics) and in Lane semantics
# (set from outside for this measurement), alternating, twice each; then xla's cold run.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data
out=${OUT:-/tmp/out}
mkdir -p "$out"
for round in 1 2; do
  for sem in Warpgroup Lane; do
    rm -rf /tmp/c_$sem; s=$(date +%s.%N)
    python3 -c "
import sys
from jax.experimental.pallas import mosaic_gpu as plgpu
from pallas_kernels.fused import cluster_mlp_mgpu as c
c.semantics = lambda: plgpu.LoweringSemantics.$sem
from experiments import mnist
from jaxshallow.run import cli
sys.argv = ['mnist', '--impl=pallas', '--compilation_cache=/tmp/c_$sem']
cli.run(mnist.main)" 2>&1 | grep "done:" | sed "s/^/$sem round $round: /" >> "$out/semantics.txt"
    awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "  wall %.1f s\n", b - a}' >> "$out/semantics.txt"
  done
  rm -rf /tmp/c_xla; s=$(date +%s.%N)
  python3 -m experiments.mnist --impl=xla --compilation_cache=/tmp/c_xla 2>&1 | grep "done:" | sed "s/^/xla round $round: /" >> "$out/semantics.txt"
  awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "  wall %.1f s\n", b - a}' >> "$out/semantics.txt"
done
cat "$out/semantics.txt"
