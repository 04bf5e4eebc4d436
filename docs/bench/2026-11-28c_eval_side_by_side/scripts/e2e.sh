#!/bin/bash
# Cold and warm walls of the training script (benchmarks.end_to_end), this checkout (the
# evaluation compiled beside the training) against the code before it (.old: `git archive` of
# the commit before), and the CNN with XLA's compilation parallelism forced. One H100, jax of
# the image. Logs and tables under $OUT.
export JAXSHALLOW_DATA_DIR=$PWD/.data
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
new() { PYTHONPATH=$PWD python -u -m benchmarks.end_to_end "$@"; }
old() { (cd .old && PYTHONPATH=$PWD python -u -m benchmarks.end_to_end "$@"); }
new --workloads=cnn --out_dir=$OUT/new_cnn > $OUT/new_cnn.log 2>&1
old --workloads=cnn --out_dir=$OUT/old_cnn > $OUT/old_cnn.log 2>&1
XLA_FLAGS=--xla_gpu_force_compilation_parallelism=16 new --workloads=cnn \
  --out_dir=$OUT/par_cnn > $OUT/par_cnn.log 2>&1
new --workloads=mlp,logreg --out_dir=$OUT/new_mlp_logreg > $OUT/new_mlp_logreg.log 2>&1
old --workloads=mlp,logreg --out_dir=$OUT/old_mlp_logreg > $OUT/old_mlp_logreg.log 2>&1
for f in new_cnn old_cnn par_cnn new_mlp_logreg old_mlp_logreg; do echo "== $f"; grep -E "cold|Error|error" $OUT/$f.log | tail -4; done
