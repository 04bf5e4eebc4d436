"""For the next GPU session, on jax 0.12 (carried wheels, see docs/bench/2026-11-27k_batch_passes
scripts/run012.sh): the four-cluster forms, which ``rowgroups_for`` keeps to jax 0.11 until they
are checked there. Forces them on, then check_kernels' batch cases and epochs of 60,000 random
rows (median of 5) at batch 256 and 512 in one and four clusters. Run with
JAXSHALLOW_COMPILATION_CACHE=off (the cache is keyed by the source, not by this patch)."""
import functools, time
import numpy as np, jax, jax.numpy as jnp
from pallas_kernels.fused import cluster_mlp_mgpu as cm
cm.checked_batches = lambda: cm.BATCHES
cm.rowgroups_for = lambda hidden, batch: cm.ROWGROUPS.get(batch, 1) if cm._groups(hidden) == 1 else 1
from experiments import check_kernels as ck
from jaxshallow import mlp
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
for case, precision, err, *bound in ck.cluster_batch_cases(np.random.default_rng(21)):
  b = bound[0] if bound else ck.TOLERANCE[precision]
  print(f"{'ok  ' if err < b else 'FAIL'} {case:72s} {precision:9s} err {err:.2e} bound {b:.1e}", flush=True)
n = 60000
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
for batch, rg in [(256, 1), (256, 4), (512, 4)]:
  f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=n // batch, batch=batch, rowgroups=rg))
  t = time.perf_counter(); jax.block_until_ready(f(params, x, y, order)); c = time.perf_counter() - t
  ts = []
  for _ in range(5):
    t = time.perf_counter(); out = jax.block_until_ready(f(params, x, y, order)); ts.append(time.perf_counter() - t)
  print(f"EPOCH batch {batch} rowgroups {rg}: {np.median(ts)*1e3:7.2f} ms  compile {c:5.1f} s", flush=True)
