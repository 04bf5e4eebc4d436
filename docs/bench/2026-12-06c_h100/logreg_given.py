"""Softmax regression's epoch kernel (logreg_mgpu) with its mask rows' loads' layouts given
(``given``: logreg_given.patch applied, as in call 9; not landed) and as before (``cast``: ``dense_mgpu.load`` without ``layout_given``),
built apart in one process, alternating: the same bits? and each build's first call (lowering
and compile) in seconds. One network (float32, bfloat16) and a population of 4 at their own
learning rates (the mask's row 1)."""
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxshallow import mlp
from pallas_kernels.fused import logreg_mgpu as k
from pallas_kernels.ops import dense_mgpu

given_load = k._load
cast_load = lambda ref, layout, layout_given=False: dense_mgpu.load(ref, layout)
rng = np.random.default_rng(0)
steps = 200
x = jnp.asarray(rng.integers(0, 256, (steps * 64, 784)), jnp.uint8)
labels = jnp.asarray(rng.integers(0, 10, steps * 64), jnp.int32)
xs, onehot = k.batches(x, labels, jnp.arange(steps * 64), steps)
params = mlp.init_mlp(jax.random.key(0), (784, 10))
pop = jax.tree.map(lambda a: jnp.stack([a] * 4), params)
lrs = jnp.asarray([0.1, 0.2, 0.3, 0.5], jnp.float32)
cases = {"one float32": lambda: k.train_steps(params, xs, onehot, 0.5, "float32"),
         "one bfloat16": lambda: k.train_steps(params, xs, onehot, 0.5, "bfloat16"),
         "population of 4": lambda: k.train_population(pop, xs[None], onehot[None], lrs)}
print("jax", jax.__version__, jax.devices()[0].device_kind, flush=True)
for name, run in cases.items():
  out, secs = {}, {}
  for form in ("cast", "given", "cast", "given"):
    k._load = given_load if form == "given" else cast_load
    k._call.cache_clear()
    jax.clear_caches()
    t = time.perf_counter()
    got = jax.block_until_ready(run())
    secs.setdefault(form, []).append(time.perf_counter() - t)
    out.setdefault(form, []).append([np.asarray(a) for a in jax.tree.leaves(got)])
  same = all(np.array_equal(a, b) for o in out["cast"] + out["given"][1:]
             for a, b in zip(out["given"][0], o))
  print(f"{name}: the same bits {same}; first call s cast "
        f"{' '.join(f'{s:.2f}' for s in secs['cast'])}, given "
        f"{' '.join(f'{s:.2f}' for s in secs['given'])}", flush=True)
