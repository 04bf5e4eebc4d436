#!/bin/bash
# Settles whether the MLP's cluster kernel should take Lane semantics on jax 0.11 at four or more
# passes a step and without clusters (docs/bench/2026-12-05a_h100: a one-process probe on random
# rows put Lane 3-5 % ahead there and it compiles the grid's points in 6 s against 32-38; the
# grid in Lane on one machine was 1-7 % behind the grid's Warpgroup rows from other machines).
# The grid's three points with the kernel in Warpgroup (jax 0.11's choice) and in Lane (forced
# from outside), one H100, jax 0.11.2, the same machine, one process each; logs under $OUT.
# Checkout root, PYTHONPATH=., MNIST under .data/data (carry .data).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
out=${OUT:-/tmp/out}
for sem in Warpgroup Lane; do
  timeout 280 python3 -c "
import sys
from jax.experimental.pallas import mosaic_gpu as plgpu
from pallas_kernels.fused import cluster_mlp_mgpu as c
c.semantics = lambda *a, **k: plgpu.LoweringSemantics.$sem
from benchmarks import bench
from jaxshallow.run import cli
sys.argv = ['bench', '--grid', '--seeds=0', '--plots=false',
            '--points=mlp batch 256,mlp batch 512,mlp hidden 2048', '--out_dir=$out/grid_$sem']
cli.run(bench.main)" > "$out/grid_$sem.txt" 2>&1
  grep "^\[" "$out/grid_$sem.txt" | sed "s/^/$sem /"
done
