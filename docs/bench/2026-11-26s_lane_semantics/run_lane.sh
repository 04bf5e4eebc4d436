#!/bin/bash
# #54: the cluster kernel in Mosaic GPU's Lane semantics (no layout inference): its checks, its
# epoch against the Warpgroup-semantics kernel of 4baf807 (one process), and the MLP end to end.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__, jax.devices())"
timeout 200 python3 -m experiments.check_kernels --only=cluster_mlp > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "cluster|FAIL|ok" $OUT/check.log | tail -14
timeout 150 python3 .device/time_single.py > $OUT/time_single.log 2>&1; echo "time rc $?"
grep -v Warn $OUT/time_single.log | tail -5
timeout 200 python3 -m benchmarks.end_to_end --workloads=mlp --out_dir=$OUT/e2e > $OUT/e2e.log 2>&1; echo "e2e rc $?"
tail -6 $OUT/e2e.log
