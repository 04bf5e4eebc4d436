"""The MLP's cluster kernel (cluster_mlp_mgpu) in Warpgroup and in Lane semantics, side by side
in one process, at the grid's shapes it trains: an epoch of 60,000 random uint8 rows, compile
(the first call) apart, median of 5 epochs, the last loss (the same network either way).
Checkout root, Hopper GPU. Usage: semantics_probe.py HIDDEN:BATCH:PRECISION ..."""
import functools
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import mosaic_gpu as plgpu

from jaxshallow import mlp
from pallas_kernels.fused import cluster_mlp_mgpu as cm

print(jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
n = 60000
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
for spec in sys.argv[1:]:
  hidden, batch, precision = spec.split(":")
  hidden, batch = int(hidden), int(batch)
  params = mlp.init_mlp(jax.random.key(0), (784, hidden, 10))
  for sem in ("Warpgroup", "Lane"):
    cm.semantics = lambda sem=sem: getattr(plgpu.LoweringSemantics, sem)
    try:
      f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=n // batch, batch=batch,
                                    precision=precision))
      t = time.perf_counter()
      jax.block_until_ready(f(params, x, y, order))
      c = time.perf_counter() - t
      ts = []
      for _ in range(5):
        t = time.perf_counter()
        out = jax.block_until_ready(f(params, x, y, order))
        ts.append(time.perf_counter() - t)
      print(f"784-{hidden}-10 batch {batch:3d} {precision:8s} {sem:9s} epoch "
            f"{np.median(ts) * 1e3:7.3f} ms  compile {c:5.1f} s  loss {float(out[1][-1]):.6f}",
            flush=True)
    except Exception as e:  # (a shape one semantics cannot lower is a row)
      print(f"784-{hidden}-10 batch {batch} {precision} {sem}: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:200]}", flush=True)
