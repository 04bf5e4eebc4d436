"""Where the regression net's small set (32-256-1, 256 samples: one step an epoch, 100 epochs a
call) spends its call: xla's and pallas' whole call of 100 epochs, and the cluster kernel alone
on the same batches (100 steps, and 1 step: the launch); median of 30, one process."""
import functools, statistics, time
import numpy as np, jax, jax.numpy as jnp
from jaxshallow import models, train, init_mlp, make_optimizer, synthetic
from pallas_kernels.fused import cluster_epoch_mgpu as c
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(30):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return 1e3 * statistics.median(ts)
rng = np.random.default_rng(0)
x, y = synthetic.make_regression(256, rng); x, y = jnp.asarray(x), jnp.asarray(y)
orders = jnp.asarray(np.stack([rng.permutation(256) for _ in range(100)]).astype(np.int32))
p = init_mlp(jax.random.key(0), (32, 256, 1), bias=False); tx = make_optimizer("sgd", 0.002)
kw = dict(tx=tx, batch_size=256, model=models.REGRESSION)
for impl, fusion in (("xla", "ops"), ("pallas", "epoch")):
  fn = functools.partial(train.train_epochs_no_donate, impl=impl, fusion=fusion, **kw)
  print(f"{impl} call of 100 epochs: {timed(fn, p, tx.init(p), x, y, orders):.3f} ms", flush=True)
xs = x[orders.reshape(-1)].reshape(100, 256, 32); ys = y[orders.reshape(-1)].reshape(100, 256)
w0, w1 = p[0]["w"], p[1]["w"][:, 0]
for steps in (100, 1):
  k = jax.jit(lambda w0, w1, xs, ys: c.train_steps(w0, w1, xs, ys, 0.002))
  print(f"cluster kernel's train_steps alone, {steps} steps: {timed(k, w0, w1, xs[:steps], ys[:steps]):.3f} ms", flush=True)
empty = jax.jit(lambda a: a + 1)
print(f"an empty jitted call: {timed(empty, w1):.3f} ms", flush=True)
