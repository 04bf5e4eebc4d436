#!/bin/bash
# Session 2026-11-27b call 1: the several-cluster kernel against float64 (check_kernels'
# cluster_groups_cases only), then its epoch times beside xla and the grid kernel.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cat > /tmp/groups.py <<'PY'
import numpy as np, jax
from experiments import check_kernels as ck
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
for case, precision, err, *bound in ck.cluster_groups_cases(np.random.default_rng(11)):
  b = bound[0] if bound else ck.TOLERANCE[precision]
  print(f"{'ok  ' if err < b else 'FAIL'} {case:70s} err {err:.2e} bound {b:.1e}", flush=True)
PY
timeout 200 python3 /tmp/groups.py > $OUT/groups.log 2>&1; echo "groups rc $?"
grep -E "ok  |FAIL|Error|error" $OUT/groups.log | tail -8
timeout 230 python3 .device/wide.py > $OUT/wide.txt 2>&1; echo "wide rc $?"; grep -v "^W\|^I0" $OUT/wide.txt | tail -5
