"""How far a float32 epoch lands from float64 by chance: the breadth issue's parity distance
(|an epoch's mean loss in float32 - in float64|, each from the same weights) for xla's
train_step and for cluster_mlp_mgpu's plain-jnp twin in float32 (the kernel's order of sums:
one cluster's passes, and four clusters' pairwise sums), over many seeds, on the CPU.

  python parity_spread.py BATCH SEEDS   (e.g. 256 0-19)

The twin is not the kernel (its products round as XLA's float32 dots on the CPU, the kernel's
as split-bfloat16 products summed in float32), so this shows the spread of the distance for an
implementation as accurate as xla, not the kernel's own values."""
import sys, time
import numpy as np
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
from jaxshallow import data, mlp, models, train
from pallas_kernels.fused import cluster_mlp_mgpu as cm

batch = int(sys.argv[1])
lo, hi = (int(v) for v in sys.argv[2].split("-"))
lr, passes = 0.5, batch // 64
ds = data.load("mnist")
x = ds.train_images.reshape(len(ds.train_images), -1)
y = ds.train_labels.astype(np.int32)
steps = len(x) // batch


def xla_epoch(p, order, dtype):
  tx = train.make_optimizer("sgd", lr)
  xs = jnp.asarray(x)[order[:steps * batch]].reshape(steps, batch, -1)
  ys = jnp.asarray(y)[order[:steps * batch]].reshape(steps, batch)

  def body(carry, b):
    p, s = carry
    p, s, m = train.train_step(p, s, (b[0].astype(dtype) / 255.0, b[1]), tx=tx, model=models.MLP)
    return (p, s), m["loss"]
  _, losses = jax.lax.scan(body, (p, tx.init(p)), (xs, ys))
  return jnp.mean(losses)


xla_jit = jax.jit(xla_epoch, static_argnums=2)


def twin_epoch(p, order, rowgroups, dtype):
  xs, onehot = cm.batches(jnp.asarray(x), jnp.asarray(y), order, steps * passes)
  _, losses, _ = cm.reference(p, xs.astype(dtype), onehot.astype(dtype), lr, passes, rowgroups)
  return jnp.mean(losses)


twin_jit = jax.jit(twin_epoch, static_argnums=(2, 3))
print(f"batch {batch}, lr {lr}, {steps} steps an epoch; distance from float64 of the epoch's "
      "mean loss; pass: at most 2x xla's + 1e-6 of the loss", flush=True)
print("seed   float64      xla        1 cluster  4 clusters   pass1 pass4", flush=True)
fails = {1: 0, 4: 0}
for seed in range(lo, hi + 1):
  t = time.perf_counter()
  p = mlp.init_mlp(jax.random.key(seed), (784, 256, 10))
  order = jnp.asarray(np.random.default_rng(seed).permutation(len(x)).astype(np.int32))
  p64 = jax.tree.map(lambda a: a.astype(jnp.float64), p)
  ref = float(xla_jit(p64, order, jnp.float64))
  d_xla = abs(float(xla_jit(p, order, jnp.float32)) - ref)
  d = {rg: abs(float(twin_jit(p, order, rg, jnp.float32)) - ref) for rg in (1, 4)}
  ok = {rg: d[rg] <= 2 * d_xla + 1e-6 * ref for rg in (1, 4)}
  for rg in (1, 4):
    fails[rg] += not ok[rg]
  print(f"{seed:4d}  {ref:.8f}  {d_xla:.2e}  {d[1]:.2e}   {d[4]:.2e}    {'yes' if ok[1] else 'NO ':3s}   "
        f"{'yes' if ok[4] else 'NO '}   ({time.perf_counter() - t:.0f} s)", flush=True)
n = hi - lo + 1
print(f"misses of the criterion: one cluster's order {fails[1]}/{n}, four clusters' {fails[4]}/{n}")
