"""cluster_mlp_mgpu with one traced step (parity a value) beside the form before (two steps
traced, .device/old_cmlp.py): the same bits, compile and epoch times; 784-256-10 at float32
and bfloat16, 784-512-10; epoch of 60000 random uint8 rows, median of 5, one process."""
import functools, statistics, sys, time
import numpy as np, jax, jax.numpy as jnp
sys.path.insert(0, ".device")
import old_cmlp
from jaxshallow import init_mlp
from pallas_kernels.fused import cluster_mlp_mgpu as new
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return 1e3 * statistics.median(ts)
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
order = jnp.asarray(rng.permutation(60000).astype(np.int32))
for hidden, precision in ((256, "float32"), (256, "bfloat16"), (512, "float32")):
  p = init_mlp(jax.random.key(0), (784, hidden, 10)); line = [f"784-{hidden}-10 {precision}:"]
  outs = []
  for name, mod in (("before", old_cmlp), ("one step", new)):
    fn = jax.jit(functools.partial(mod.train_epoch, lr=0.1, steps=937, precision=precision))
    t = time.perf_counter(); fn.lower(p, x, y, order).compile(); c = time.perf_counter() - t
    ms = timed(fn, p, x, y, order); outs.append(fn(p, x, y, order))
    line.append(f"{name} {ms:.2f} ms (compile {c:.1f} s)")
  same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])))
  line.append(f"same bits: {same}")
  print("  ".join(line), flush=True)
