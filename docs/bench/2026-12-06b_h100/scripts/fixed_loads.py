"""The MLP's cluster kernel (cluster_mlp_mgpu, Warpgroup semantics on jax 0.11) with its 1-D
loads as before (``plgpu.load`` and a layout cast, the layout guessed by Mosaic GPU's
inference) and with their layouts given (``dense_mgpu.load(layout_given=True)``, then named ``fixed``), side by side in one
process at the grid's shapes it trains: an epoch of 60,000 random uint8 rows; compile (the
first call) apart; epochs alternating, median of 7 each; whether the two give the same bits.
Checkout root, Hopper GPU. Usage: fixed_loads.py HIDDEN:BATCH:PRECISION ..."""
import functools
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxshallow import mlp
from pallas_kernels.fused import cluster_mlp_mgpu as cm
from pallas_kernels.ops import dense_mgpu

print(jax.devices()[0].device_kind, "jax", jax.__version__, "semantics", cm.semantics(), flush=True)
n = 60000
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
LOADS = {"cast": lambda ref, layout, **given: dense_mgpu.load(ref, layout),
         "fixed": dense_mgpu.load}
for spec in sys.argv[1:]:
  hidden, batch, precision = spec.split(":")
  hidden, batch = int(hidden), int(batch)
  params = mlp.init_mlp(jax.random.key(0), (784, hidden, 10))
  fns, outs, compile_s, times = {}, {}, {}, {}
  for name, load in LOADS.items():
    cm._load = load
    cm._call.cache_clear()
    jax.clear_caches()
    fns[name] = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=n // batch, batch=batch,
                                          precision=precision))
    t = time.perf_counter()
    outs[name] = jax.block_until_ready(fns[name](params, x, y, order))
    compile_s[name] = time.perf_counter() - t
    times[name] = []
  for _ in range(7):
    for name, f in fns.items():
      t = time.perf_counter()
      jax.block_until_ready(f(params, x, y, order))
      times[name].append(time.perf_counter() - t)
  same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in
             zip(jax.tree.leaves(outs["cast"]), jax.tree.leaves(outs["fixed"])))
  print(f"784-{hidden}-10 batch {batch:3d} {precision:8s} "
        + "  ".join(f"{k}: epoch {np.median(v) * 1e3:7.3f} ms compile {compile_s[k]:5.1f} s"
                    for k, v in times.items())
        + f"  same bits: {same}  loss {float(outs['fixed'][1][-1]):.6f}", flush=True)
