#!/bin/bash
# Call 4: the regression net's cluster kernel in two clusters (32-1024-1): check_kernels
# --only=cluster (64 .. 512 as before, 1024 at 7 and 100 steps), an epoch of the large set
# beside xla and the grid kernel, then the grid's point "regression hidden 1024".
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 200 python3 -m experiments.check_kernels --only=cluster --seed=5 > $OUT/check_cluster.log 2>&1; echo "check rc $?"
grep -E "ok  |FAIL|passed" $OUT/check_cluster.log | tail -8
cat > /tmp/reg.py <<'PY'
import functools, statistics, time
import numpy as np, jax, jax.numpy as jnp
from jaxshallow import models, train, init_mlp, make_optimizer, synthetic
from jaxshallow.fused import epoch as fused_epoch
from pallas_kernels.fused import cluster_epoch_mgpu as c, mlp_epoch
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(7):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
rng = np.random.default_rng(0)
x, y = synthetic.make_regression(25600, rng); x, y = jnp.asarray(x), jnp.asarray(y)
order = jnp.asarray(rng.permutation(25600).astype(np.int32)); steps, lr = 100, 0.002
for hidden in (512, 1024):
  widths = (32, hidden, 1); p = init_mlp(jax.random.key(0), widths, bias=False); tx = make_optimizer("sgd", lr)
  xla = jax.jit(functools.partial(train._epoch, tx=tx, batch_size=256, model=models.REGRESSION))
  line = [f"32-{hidden}-1 large set: xla {1e3 * timed(xla, p, tx.init(p), x, y, order):.3f} ms"]
  plan = mlp_epoch.make_plan(widths, 256, steps, head="mse", bias=False, max_programs=fused_epoch.max_programs())
  grid = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
  line.append(f"grid kernel {1e3 * timed(grid, p, None, x, y, order, lr, 0.9):.3f}")
  cl = jax.jit(functools.partial(c.train_epoch, lr=lr, steps=steps, use_kernel=True))
  t = time.perf_counter(); cl.lower(p, x, y, order).compile(); comp = time.perf_counter() - t
  line.append(f"cluster kernel {1e3 * timed(cl, p, x, y, order):.3f} (compile {comp:.0f} s)")
  print("  ".join(line), flush=True)
PY
timeout 150 python3 /tmp/reg.py > $OUT/reg_times.txt 2>&1; echo "times rc $?"; grep -v "^W\|^I0" $OUT/reg_times.txt | tail -3
ALT="" BUDGET=150 bash .device/run_grid.sh "regression hidden 1024"
