"""784-2048-10 in cluster_mlp_mgpu without clusters (8 groups of 16 CTAs, exchanges through
global memory): check_kernels' cluster_groups_cases for this width alone (20 steps against
float64 train_step, bounded by twice xla's float32 distance; twice: the same bits), then the
epoch's time on 60,000 random rows (median of 5, after a warm-up)."""
import functools, time
import numpy as np, jax, jax.numpy as jnp
from experiments import check_kernels as ck
from jaxshallow import models
from pallas_kernels.fused import cluster_mlp_mgpu as cm

print(jax.devices()[0].device_kind, jax.__version__, flush=True)
rng = np.random.default_rng(28)
lr, steps, hidden = 0.1, 20, 2048
run = jax.jit(functools.partial(cm.train_epoch, lr=lr, steps=steps))
for draw in range(2):
  x, y, order, params = ck._cluster_inputs(rng, hidden, steps)
  t0 = time.perf_counter()
  got, losses, _ = jax.block_until_ready(run(params, x, y, order))
  print(f"first call (compile and run) {time.perf_counter() - t0:.1f} s", flush=True)
  inputs = (params, x, y, order, lr, "sgd", cm.BATCH, models.MLP, steps)
  ref = ck._epoch_reference(*inputs)
  bound, xla_err = ck._float32_bound(ref, *inputs)
  err = ck._distance(losses, jax.tree.leaves(got), *ref)
  print(f"{'ok  ' if err < bound else 'FAIL'} 784-2048-10 flat, {steps} steps: rel err {err:.2e} "
        f"bound {bound:.1e} (xla {xla_err:.1e})", flush=True)
  same = ck._same_bits((got, losses), run(params, x, y, order)[:2])
  print(f"twice: {'the same bits' if same == 0 else f'DIFFERENT ({same})'}", flush=True)
  if err < bound:
    break

n, steps = 60000, 937
x = jnp.asarray(rng.integers(0, 256, (n, 784)), jnp.uint8)
y = jnp.asarray(rng.integers(0, 10, n), jnp.int32)
order = jnp.asarray(rng.permutation(n), jnp.int32)
_, _, _, params = ck._cluster_inputs(rng, hidden, 1)
epoch = jax.jit(functools.partial(cm.train_epoch, lr=0.01, steps=steps))
jax.block_until_ready(epoch(params, x, y, order))
times = []
for _ in range(5):
  t0 = time.perf_counter()
  jax.block_until_ready(epoch(params, x, y, order))
  times.append(time.perf_counter() - t0)
print(f"epoch of {steps} steps: median {1e3 * np.median(times):.2f} ms "
      f"({', '.join(f'{1e3 * t:.2f}' for t in times)})", flush=True)
