#!/bin/bash
# Call 2: padded and several-cluster cases against float64 (128, 512, 1000), then the grid's
# points that the cluster kernel now takes (one process a point, without --alternatives).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
cat > /tmp/groups.py <<'PY'
import numpy as np, jax
from experiments import check_kernels as ck
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
for case, precision, err, *bound in ck.cluster_groups_cases(np.random.default_rng(12)):
  b = bound[0] if bound else ck.TOLERANCE[precision]
  print(f"{'ok  ' if err < b else 'FAIL'} {case:70s} err {err:.2e} bound {b:.1e}", flush=True)
PY
timeout 200 python3 /tmp/groups.py > $OUT/groups.log 2>&1; echo "groups rc $?"
grep -E "ok  |FAIL|Error|error" $OUT/groups.log | tail -8
ALT="" BUDGET=330 bash .device/run_grid.sh "mlp hidden 512" "mlp hidden 1024" "mlp hidden 128"
