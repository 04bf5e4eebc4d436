"""Softmax regression's population on the H100: where an epoch of 64 members goes. The batches'
gather alone (bfloat16 pixels, each member its own order), the kernel alone on gathered
batches, and the two together (population_bench's pallas row); median of 7 after a warm-up."""
import functools, statistics, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import mlp, population
from pallas_kernels.fused import logreg_mgpu as k
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
steps = 937


def timed(fn):
  jax.block_until_ready(fn()); ts = []
  for _ in range(7):
    t = time.perf_counter(); jax.block_until_ready(fn()); ts.append(time.perf_counter() - t)
  return 1e3 * statistics.median(ts)


for members in (8, 64, 132):
  seeds = list(range(members))
  params = population.init_params(lambda key: mlp.init_mlp(key, (784, 10)), seeds)
  orders = jnp.asarray(population.epoch_orders(seeds, 0, 60000))
  lrs = jnp.full((members,), 0.1, jnp.float32)
  gather = jax.jit(lambda o: jax.vmap(lambda oo: k.batches(x, y, oo, steps))(o))
  xs, oh = gather(orders)
  kernel = jax.jit(k.train_population)
  both = jax.jit(lambda p, o, l: k.train_population(p, *gather(o), l))
  shared = jax.jit(lambda p, o, l: k.train_population(p, *jax.tree.map(lambda a: a[None], k.batches(x, y, o[0], steps)), l))
  t_g = timed(lambda: gather(orders))
  t_k = timed(lambda: kernel(params, xs, oh, lrs))
  t_b = timed(lambda: both(params, orders, lrs))
  t_s = timed(lambda: shared(params, orders, lrs))
  print(f"{members:4d} members: gather {t_g:.2f} ms, kernel {t_k:.2f} ms, both {t_b:.2f} ms; "
        f"shared batches (one gather) {t_s:.2f} ms", flush=True)
