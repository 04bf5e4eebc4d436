export PYTHONUNBUFFERED=1 PYTHONPATH=.; python3 - <<'P' 2>&1 | grep -v "^W1\|^I1" | tee $OUT/log
import jax, jax.numpy as jnp, numpy as np
from pallas_kernels.fused import cluster_mlp_mgpu as cm
from jaxshallow import data
ds = data.load("mnist", ".data")
x, y = jnp.asarray(ds.train_images), jnp.asarray(ds.train_labels)
def init(k):
  a, b = jax.random.split(k)
  return [{"w": jax.random.normal(a, (784, 256)) * (2 / 784) ** .5, "b": jnp.zeros(256)},
          {"w": jax.random.normal(b, (256, 10)) * (1 / 256) ** .5, "b": jnp.zeros(10)}]
for batch in (256, 512):
  passes, rg = batch // 64, 4
  steps = 60000 // batch
  for seed in (2, 1):
    order = jax.random.permutation(jax.random.PRNGKey(seed), 60000)
    xs, oh = cm.batches(x, y, order, steps * passes)
    p = init(jax.random.PRNGKey(100 + seed))
    call = cm._call(xs.shape[0] // rg, 0.1, 3, passes=passes, rowgroups=rg)
    copies = jax.tree.map(lambda a: jnp.broadcast_to(a, (rg,) + a.shape), p)
    first = None; bad_clusters = bad_runs = 0
    for run in range(30):
      out = cm._launch(call, copies, jnp.zeros(rg), xs[None], oh[None], passes)
      leaves = [np.asarray(l) for l in jax.tree.leaves(out[0])]
      for l in leaves:
        for i in range(1, rg):
          if not np.array_equal(l[i].view(np.uint32), l[0].view(np.uint32)):
            bad_clusters += 1
      flat = [l[0].view(np.uint32) for l in leaves] + [np.asarray(out[1]).view(np.uint32)]
      if first is None: first = flat
      elif not all(np.array_equal(a, b) for a, b in zip(flat, first)): bad_runs += 1
    print(f"batch {batch} seed {seed}: 30 runs, cluster mismatches {bad_clusters}, runs differing from first {bad_runs}, last loss {float(np.asarray(out[1])[0][-1]):.6f}")
P
