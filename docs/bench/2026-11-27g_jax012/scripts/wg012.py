"""(Next session, jax 0.12 from carried wheels) cluster_mlp_mgpu in Warpgroup semantics (forced)
beside Lane (its semantics() on 0.12): the same bits?, compile and epoch times, 784-256-10 and
784-512-10 float32, one process; argv[1] == "check": check_kernels --only=cluster_mlp in
Warpgroup instead."""
import functools, importlib, statistics, sys, time
import numpy as np, jax, jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu
from pallas_kernels.fused import cluster_mlp_mgpu as c
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
WG = lambda: plgpu.LoweringSemantics.Warpgroup
if sys.argv[1:] == ["check"]:
  c.semantics = WG
  from experiments import check_kernels
  sys.argv = ["check_kernels", "--only=cluster_mlp", "--seed=41"]
  from absl import app
  app.run(check_kernels.main)
from jaxshallow import init_mlp
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return 1e3 * statistics.median(ts)
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
order = jnp.asarray(rng.permutation(60000).astype(np.int32))
lane = c.semantics
for hidden in (256, 512):
  p = init_mlp(jax.random.key(0), (784, hidden, 10)); line = [f"784-{hidden}-10:"]; outs = []
  for name, sem in (("lane", lane), ("warpgroup", WG)):
    c.semantics = sem; c._call.cache_clear()
    fn = jax.jit(functools.partial(c.train_epoch, lr=0.1, steps=937))
    t = time.perf_counter(); fn.lower(p, x, y, order).compile(); comp = time.perf_counter() - t
    line.append(f"{name} {timed(fn, p, x, y, order):.2f} ms (compile {comp:.1f} s)"); outs.append(fn(p, x, y, order))
  same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])))
  print("  ".join(line), f"same bits: {same}", flush=True)
