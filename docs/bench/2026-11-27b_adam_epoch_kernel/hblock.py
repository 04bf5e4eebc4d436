"""The grid epoch kernel's hidden tile width (Plan.hidden_block) against the epoch time, one
process: each network's epoch on random data of the workload's size, xla's scan beside it;
median of 5 epochs after a warm-up; compile apart."""
import functools, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import init_mlp, make_optimizer, models, train
from jaxshallow.fused import epoch as fused_epoch
from pallas_kernels.fused import mlp_epoch
T0 = time.perf_counter()
CASES = [((784, 512, 10), 64, 0.5), ((784, 512, 256, 10), 64, 0.1), ((784, 256, 10), 128, 0.5),
         ((784, 1024, 10), 64, 0.5), ((32, 1024, 1), 256, 0.002), ((784, 256, 10), 256, 0.5),
         ((32, 256, 256, 1), 256, 0.002), ((784, 256, 10), 64, 0.5), ((784, 256, 1024, 256, 10), 64, 0.1)]
rng = np.random.default_rng(0)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
for widths, batch, lr in CASES:
  mse = widths[-1] == 1
  n = 25600 if mse else 60000
  x = jnp.asarray(rng.uniform(-1, 1, (n, 32)).astype(np.float32)) if mse else jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
  y = jnp.sum(x ** 2, axis=1) if mse else jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
  order = jnp.asarray(rng.permutation(n).astype(np.int32))
  params = init_mlp(jax.random.key(0), widths, bias=not mse)
  steps = n // batch
  tx = make_optimizer("sgd", lr)
  model = models.REGRESSION if mse else models.MLP
  xla = jax.jit(functools.partial(train._epoch, tx=tx, batch_size=batch, model=model))
  line = [f"{'-'.join(map(str, widths))} b{batch}: xla {1e3 * timed(xla, params, tx.init(params), x, y, order):.2f} ms"]
  for hb in (16, 32, 64) if max(widths[1:-1]) >= 512 else (16, 32):
    if time.perf_counter() - T0 > 500:
      line.append(f"hb{hb} skipped"); continue
    plan = mlp_epoch.make_plan(widths, batch, steps, head="mse" if mse else "xent", bias=not mse,
                               max_programs=fused_epoch.max_programs(), hidden_block=hb)
    fn = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
    try:
      t = time.perf_counter(); fn.lower(params, None, x, y, order, lr, 0.9).compile(); c = time.perf_counter() - t
      line.append(f"hb{hb} {1e3 * timed(fn, params, None, x, y, order, lr, 0.9):.2f} ms (P={plan.programs}, work {plan.work_per_program():.2e}, compile {c:.0f} s)")
    except Exception as e:
      line.append(f"hb{hb} failed: {type(e).__name__} {str(e)[:100]}")
  print("  ".join(line), flush=True)
