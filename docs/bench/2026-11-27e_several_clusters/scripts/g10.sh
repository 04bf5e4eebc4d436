#!/bin/bash
# Call 10: several clusters at tf32 and bfloat16 (784-512-10, one step and 7 steps) against
# float64 on what is continuous in the rounding (the loss, the last layer), as check_kernels'
# single-network cases.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
cat > /tmp/prec.py <<'PY'
import functools, numpy as np, jax
from experiments import check_kernels as ck
from jaxshallow import models
from pallas_kernels.fused import cluster_mlp_mgpu as c
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
rng = np.random.default_rng(31)
for steps in (1, 7):
  x, y, order, params = ck._cluster_inputs(rng, 512, steps)
  ref_losses, ref_params = ck._epoch_reference(params, x, y, order, 0.1, "sgd", 64, models.MLP, steps)
  for precision in ("tf32", "bfloat16"):
    fn = jax.jit(functools.partial(c.train_epoch, lr=0.1, steps=steps, precision=precision))
    got, losses, _ = fn(params, x, y, order)
    pairs = list(zip(jax.tree.leaves(got), ref_params))[-2:]
    err = max(ck.rel_err(losses, ref_losses), *(ck.rel_err(a, b) for a, b in pairs))
    tol = ck.TOLERANCE[precision] * (1 if steps == 1 else 4)
    print(f"{'ok  ' if err < tol else 'FAIL'} 784-512-10 {precision} {steps} steps err {err:.2e} (tolerance {tol:.0e})", flush=True)
PY
timeout 150 python3 /tmp/prec.py > $OUT/prec.txt 2>&1; echo "rc $?"; grep -v "^W\|^I0" $OUT/prec.txt | tail -5
