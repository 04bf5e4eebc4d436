"""Where the streamed population's epoch goes beyond the kernel's steps: each member's batches
gathered (``stream_population_mgpu.batches``), the kernel on gathered batches, and the whole
``train_epoch_stream``, each jitted alone, median of 5 after a warm-up. 64 members of the
reference MLP, each its own order of 60,000 random images (one epoch: 937 steps).
Usage: gather_split.py [MEMBERS] [--cpu: the kernel's jnp twin, tiny sizes, for a dry run]"""

import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxshallow import mlp, population as pop
from jaxshallow.fused import population as fused_population
from pallas_kernels.fused import stream_population_mgpu as k

cpu = "--cpu" in sys.argv
members = int(next((a for a in sys.argv[1:] if a.isdigit()), 64))
n = 640 if cpu else 60_000
steps = n // k.BATCH
rng = np.random.default_rng(0)
images = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
labels = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
orders = jnp.asarray(np.stack([rng.permutation(n) for _ in range(members)]).astype(np.int32))
params = pop.init_params(lambda key: mlp.init_mlp(key, (784, 256, 10)), list(range(members)))
lrs = jnp.full((members,), 0.1, jnp.float32)
train = k.reference if cpu else k.train_steps

gather = jax.jit(lambda o: k.batches(images.reshape(n, -1), labels, o, steps))
kernel = jax.jit(train)
whole = jax.jit(lambda p, o, lr: fused_population.train_epoch_stream(
    p, images, labels, o, lr, batch_size=k.BATCH, twin=cpu))


def ms(fn, *args):
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(5):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t0)
  return 1e3 * statistics.median(times)


print(f"device {jax.devices()[0].device_kind}; jax {jax.__version__}; {members} members, "
      f"{steps} steps", flush=True)
t_gather = ms(gather, orders)
xs, onehot = gather(orders)
t_kernel = ms(kernel, params, lrs, xs, onehot)
del xs, onehot
t_whole = ms(whole, params, orders, lrs)
print(f"gather {t_gather:.1f} ms, kernel on gathered batches {t_kernel:.1f} ms "
      f"({1e3 * t_kernel / steps:.1f} us a step), the whole epoch {t_whole:.1f} ms", flush=True)
