"""cluster_mlp_mgpu with a step's passes split between two clusters (rowgroups=2): the checks
against float64, then epochs (60,000 random rows, median of 5) beside one cluster's passes.
Lane semantics on jax 0.11 (argv[1] == "lane"): a short compile."""
import functools, sys, time
import numpy as np, jax, jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu
from experiments import check_kernels as ck
from jaxshallow import mlp
from pallas_kernels.fused import cluster_mlp_mgpu as cm
if sys.argv[1:2] == ["lane"]:
  cm.semantics = lambda: plgpu.LoweringSemantics.Lane
print(jax.devices()[0].device_kind, jax.__version__, sys.argv[1:], flush=True)
for case, precision, err, *bound in ck.cluster_rowgroup_cases(np.random.default_rng(31)):
  b = bound[0] if bound else ck.TOLERANCE[precision]
  print(f"{'ok  ' if err < b else 'FAIL'} {case:72s} err {err:.2e} bound {b:.1e}", flush=True)
n = 60000
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
for batch, rowgroups in [(256, 1), (256, 2), (512, 2)]:
  f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=n // batch, batch=batch, rowgroups=rowgroups))
  t = time.perf_counter(); jax.block_until_ready(f(params, x, y, order)); c = time.perf_counter() - t
  ts = []
  for _ in range(5):
    t = time.perf_counter(); out = jax.block_until_ready(f(params, x, y, order)); ts.append(time.perf_counter() - t)
  print(f"EPOCH batch {batch} rowgroups {rowgroups}: {np.median(ts)*1e3:7.2f} ms  compile {c:5.1f} s  loss {float(out[1][-1]):.6f}", flush=True)
