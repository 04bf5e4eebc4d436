"""jax 0.12 (carried wheels): the four-cluster forms forced on (rowgroups_for keeps them to jax
0.11 until checked): float64 checks at batch 256 and 512 (20 steps, twice: same bits), then
epochs of 60,000 random rows (median of 5). JAXSHALLOW_COMPILATION_CACHE=off."""
import functools, sys, time
import numpy as np, jax, jax.numpy as jnp
from pallas_kernels.fused import cluster_mlp_mgpu as cm
cm.checked_batches = lambda: cm.BATCHES
cm.rowgroups_for = lambda hidden, batch: cm.ROWGROUPS.get(batch, 1) if cm._groups(hidden) == 1 else 1
from experiments import check_kernels as ck
from jaxshallow import mlp, models
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
part = sys.argv[1]
if part == "check":
  rng = np.random.default_rng(21)
  lr, steps = 0.1, 20
  for batch in (256, 512):
    t0 = time.perf_counter()
    run = jax.jit(functools.partial(cm.train_epoch, lr=lr, steps=steps, batch=batch))
    x, y, order, params = ck._cluster_inputs(rng, 256, steps, batch)
    got, losses, _ = run(params, x, y, order)
    inputs = (params, x, y, order, lr, "sgd", batch, models.MLP, steps)
    ref = ck._epoch_reference(*inputs)
    bound, xla_err = ck._float32_bound(ref, *inputs)
    err = ck._distance(losses, jax.tree.leaves(got), *ref)
    print(f"{'ok  ' if err < bound else 'FAIL'} batch {batch} rowgroups {cm.rowgroups_for(256, batch)} {steps} steps err {err:.2e} bound {bound:.1e} (xla {xla_err:.1e})", flush=True)
    same = ck._same_bits((got, losses), run(params, x, y, order)[:2])
    print(f"same bits twice: {same}  ({time.perf_counter() - t0:.0f} s)", flush=True)
else:
  n = 60000
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
  y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
  params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
  order = jnp.asarray(rng.permutation(n).astype(np.int32))
  for batch, rg in [(256, 4), (512, 4), (256, 1)]:
    f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=n // batch, batch=batch, rowgroups=rg))
    t = time.perf_counter(); jax.block_until_ready(f(params, x, y, order)); c = time.perf_counter() - t
    ts = []
    for _ in range(5):
      t = time.perf_counter(); out = jax.block_until_ready(f(params, x, y, order)); ts.append(time.perf_counter() - t)
    print(f"EPOCH batch {batch} rowgroups {rg}: {np.median(ts)*1e3:7.2f} ms  compile {c:5.1f} s  loss {float(out[1][-1]):.4f}", flush=True)
