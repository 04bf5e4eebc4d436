"""cluster_mlp_mgpu 784-256-10 at batch 128 (2 passes): the passes' tile split and W0 held in
registers, each variant's epoch (60,000 random uint8 rows, median of 5) beside batch 64."""
import functools, os, sys, time
import numpy as np, jax, jax.numpy as jnp
from jaxshallow import mlp
from pallas_kernels.fused import cluster_mlp_mgpu as cm
n = 60000
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
for spec in sys.argv[1:]:
  precision, batch, split, regs = spec.split(":")
  cm.PASS_SPLIT, cm.PASS_REGISTERS = int(split), regs == "1"
  cm._call.cache_clear()
  f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=n // int(batch), batch=int(batch), precision=precision))
  t = time.perf_counter(); jax.block_until_ready(f(params, x, y, order)); c = time.perf_counter() - t
  ts = []
  for _ in range(5):
    t = time.perf_counter(); out = jax.block_until_ready(f(params, x, y, order)); ts.append(time.perf_counter() - t)
  print(f"VAR {spec:22s} {np.median(ts)*1e3:7.2f} ms  compile {c:5.1f} s  loss {float(out[1][-1]):.6f}", flush=True)
