#!/bin/bash
# The device call for the backends work of 2026-11-29 (run from the checkout's root on a Hopper
# GPU, jax 0.11.2 or 0.12; logs under $OUT): the guard over the Mosaic groups and rows (a Triton
# lowering there must stop the check), the notice on a Triton path, and the time to a trained
# network now that Mosaic GPU runs evaluate in xla's ops. Not yet run (written 2026-11-29).
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1; shift; echo "== $*" | tee -a "$out/$name"; timeout 240 python3 -m "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee -a "$out/$name"; }
# 1. The Mosaic groups under the guard (their first line says the guard is on).
run guard.txt experiments.check_kernels --only=logreg,cluster_mlp,grid_regression
# 2. A Triton path: the one-line notice, and the run trains as before.
run notice.txt experiments.mnist --impl=pallas --model=cnn --epochs=1 --train_limit=6400
# 3. The reference rows under the guard (training and evaluation lower no Triton kernel).
run grid.txt benchmarks.bench --grid --plots=false --out_dir="$out/grid" \
  "--points=mlp reference,softmax regression,regression large"
# 4. Time to a trained network, cold and warm (the evaluation in xla's ops on Mosaic paths).
run e2e.txt benchmarks.end_to_end --workloads=mlp,logreg --out_dir="$out/e2e"
