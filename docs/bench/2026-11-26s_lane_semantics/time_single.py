"""The single-network cluster kernel before (4baf807) and after the member axis, one process:
an epoch of 937 steps on random MNIST-shaped data, 7 timed epochs each (medians), alternating."""
import importlib.util, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import mlp
from pallas_kernels.fused import cluster_mlp_mgpu as new
spec = importlib.util.spec_from_file_location("old_cluster", ".device/old_cluster_mlp_mgpu.py")
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
rng = np.random.default_rng(0)
n, steps = 60000, 937
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
p0 = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
fns = {}
for name, mod in (("old", old), ("new", new)):
  t0 = time.perf_counter()
  fns[name] = jax.jit(lambda p, x, y, o, mod=mod: mod.train_epoch(p, x, y, o, 0.1, steps=steps)).lower(p0, x, y, order).compile()
  print(name, "compile", round(time.perf_counter() - t0, 1), "s", flush=True)
times = {k: [] for k in fns}
outs = {}
for rep in range(8):
  for name, fn in fns.items():
    t0 = time.perf_counter()
    out = fn(p0, x, y, order); jax.block_until_ready(out)
    if rep: times[name].append(time.perf_counter() - t0)
    outs[name] = out
for name in fns:
  print(f"{name}: median {1e3 * statistics.median(times[name]):.2f} ms/epoch  all {[round(1e3 * t, 2) for t in times[name]]}")
same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(jax.tree.leaves(outs["old"]), jax.tree.leaves(outs["new"])))
print("same bits old/new:", same)
