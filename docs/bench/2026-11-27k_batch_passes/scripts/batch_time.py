"""Epoch times (60,000 random uint8 rows) of cluster_mlp_mgpu 784-256-10 at batch 64 P (P passes)
beside xla's scan of train_step, one process, median of 5; compile time apart."""
import functools, sys, time
import numpy as np, jax, jax.numpy as jnp
from jaxshallow import mlp, train, models
from pallas_kernels.fused import cluster_mlp_mgpu as cm
precision = sys.argv[1] if len(sys.argv) > 1 else "float32"
batches = [int(b) for b in (sys.argv[2] if len(sys.argv) > 2 else "64,128,256,512").split(",")]
n = 60000
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
print(jax.devices()[0].device_kind, jax.__version__, precision, flush=True)

def timed(f, *a, reps=5):
  t = time.perf_counter(); jax.block_until_ready(f(*a)); first = time.perf_counter() - t
  ts = []
  for _ in range(reps):
    t = time.perf_counter(); jax.block_until_ready(f(*a)); ts.append(time.perf_counter() - t)
  return first - np.median(ts), float(np.median(ts))

print(f"{'batch':>5} {'cluster ms':>10} {'xla ms':>8} {'vs xla':>7} {'compile s':>9} {'xla compile':>11}", flush=True)
for batch in batches:
  steps = n // batch
  order = jnp.asarray(rng.permutation(n).astype(np.int32))
  f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=steps, batch=batch, precision=precision))
  c_compile, c = timed(f, params, x, y, order)
  tx = train.make_optimizer("sgd", 0.1)
  g = functools.partial(train.train_epoch_no_donate, tx=tx, batch_size=batch, impl="xla",
                        precision=precision, model=models.MLP)
  x_compile, xt = timed(g, params, tx.init(params), x.reshape(n, 28, 28), y, order)
  print(f"{batch:5d} {c*1e3:10.2f} {xt*1e3:8.2f} {xt/c:6.2f}x {c_compile:9.1f} {x_compile:11.1f}", flush=True)
