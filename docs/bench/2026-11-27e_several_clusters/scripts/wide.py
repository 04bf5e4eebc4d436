"""(Next session) cluster_mlp_mgpu on 784-512-10 and 784-1024-10 (2 and 4 clusters meeting at a grid
barrier every step) beside xla and the grid epoch kernel: epoch of 60000 random uint8 rows, SGD
lr 0.1, median of 5 epochs, compile apart; one process. Then the 784-256-10 kernel as before."""
import functools, statistics, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import models, train, init_mlp, make_optimizer
from jaxshallow.fused import epoch as fused_epoch
from pallas_kernels.fused import cluster_mlp_mgpu, mlp_epoch
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
order = jnp.asarray(rng.permutation(60000).astype(np.int32)); steps, lr = 937, 0.1
for hidden in (512, 1024, 256):
  widths = (784, hidden, 10); params = init_mlp(jax.random.key(0), widths); tx = make_optimizer("sgd", lr)
  xla = jax.jit(functools.partial(train._epoch, tx=tx, batch_size=64, model=models.MLP))
  line = [f"784-{hidden}-10: xla {1e3 * timed(xla, params, tx.init(params), x, y, order):.2f} ms"]
  plan = mlp_epoch.make_plan(widths, 64, steps, max_programs=fused_epoch.max_programs())
  grid = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
  line.append(f"grid kernel {1e3 * timed(grid, params, None, x, y, order, lr, 0.9):.2f}")
  cl = jax.jit(functools.partial(cluster_mlp_mgpu.train_epoch, lr=lr, steps=steps))
  t = time.perf_counter(); cl.lower(params, x, y, order).compile(); c = time.perf_counter() - t
  line.append(f"cluster kernel {1e3 * timed(cl, params, x, y, order):.2f} (compile {c:.0f} s)")
  got, losses, _ = cl(params, x, y, order)
  line.append(f"last loss {float(losses[-1]):.4f} finite {bool(np.isfinite(np.asarray(losses)).all())}")
  print("  ".join(line), flush=True)
