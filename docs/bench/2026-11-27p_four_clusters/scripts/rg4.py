"""cluster_mlp_mgpu with a step's passes split between 2 or 4 clusters (butterfly exchange, early
sends): checks against float64 (20 steps, same bits twice), then epochs (60,000 random rows,
median of 5). Lane semantics with argv[1] == "lane" (short compile)."""
import functools, sys, time
import numpy as np, jax, jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu
from experiments import check_kernels as ck
from jaxshallow import mlp, models
from pallas_kernels.fused import cluster_mlp_mgpu as cm
if sys.argv[1:2] == ["lane"]:
  cm.semantics = lambda: plgpu.LoweringSemantics.Lane
print(jax.devices()[0].device_kind, jax.__version__, sys.argv[1:], flush=True)
configs = [(256, 4), (512, 4), (256, 2), (512, 2)]
rng = np.random.default_rng(31)
lr, steps = 0.1, 20
for batch, rg in configs:
  try:
    run = jax.jit(functools.partial(cm.train_epoch, lr=lr, steps=steps, batch=batch, rowgroups=rg))
    x, y, order, params = ck._cluster_inputs(rng, 256, steps, batch)
    got, losses, _ = run(params, x, y, order)
    inputs = (params, x, y, order, lr, "sgd", batch, models.MLP, steps)
    ref = ck._epoch_reference(*inputs)
    bound, xla_err = ck._float32_bound(ref, *inputs)
    err = ck._distance(losses, jax.tree.leaves(got), *ref)
    same = ck._same_bits((got, losses), run(params, x, y, order)[:2])
    print(f"{'ok  ' if err < bound and same == 0 else 'FAIL'} batch {batch} in {rg} clusters: err {err:.2e} (xla {xla_err:.0e}, bound {bound:.0e}) twice {same:.1e}", flush=True)
  except Exception as e:
    print(f"ERROR batch {batch} rowgroups {rg}: {type(e).__name__}: {str(e)[:300]}", flush=True)
n = 60000
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
for batch, rg in configs:
  try:
    f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=n // batch, batch=batch, rowgroups=rg))
    t = time.perf_counter(); jax.block_until_ready(f(params, x, y, order)); c = time.perf_counter() - t
    ts = []
    for _ in range(5):
      t = time.perf_counter(); out = jax.block_until_ready(f(params, x, y, order)); ts.append(time.perf_counter() - t)
    print(f"EPOCH batch {batch} rowgroups {rg}: {np.median(ts)*1e3:7.2f} ms  compile {c:5.1f} s  loss {float(out[1][-1]):.6f}", flush=True)
  except Exception as e:
    print(f"ERROR epoch batch {batch} rowgroups {rg}: {type(e).__name__}: {str(e)[:300]}", flush=True)
