"""(Next session) int_inputs beside split products. Split bfloat16 products (mlp_epoch.tiles_for's plans) on the H100: (1) against float64 over
20 steps, check_kernels' inputs, seeds 1-3, beside xla's float32 steps and the kernel run twice;
(2) epoch times of the same plans on random data of MNIST's size, the FMA plan (tiles of 16)
and xla beside them, median of 5 epochs, compile apart. One process."""
import functools, statistics, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import mlp, models, train, init_mlp, make_optimizer
from jaxshallow.fused import epoch as fused_epoch
from pallas_kernels.fused import mlp_epoch
from experiments import check_kernels as ck
T0 = time.perf_counter()
NETS = [((784, 256, 256, 10), 64, "sgd", 32), ((784, 512, 10), 64, "adam", None), ((784, 1024, 10), 64, "sgd", None),
        ((784, 256, 1024, 256, 10), 64, "sgd", None), ((784, 512, 256, 10), 64, "sgd", None),
        ((784, 256, 10), 128, "momentum", None), ((784, 600, 10), 100, "sgd", None)]
print("## epoch times, ms", flush=True)
rng = np.random.default_rng(0)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
order = jnp.asarray(rng.permutation(60000).astype(np.int32))
for widths, batch, lr in [((784, 512, 10), 64, 0.5), ((784, 1024, 10), 64, 0.5), ((784, 256, 10), 128, 0.5), ((784, 256, 1024, 256, 10), 64, 0.1)]:
  if time.perf_counter() - T0 > 200: print("time up"); break
  params = init_mlp(jax.random.key(0), widths); tx = make_optimizer("sgd", lr); steps = 60000 // batch
  xla = jax.jit(functools.partial(train._epoch, tx=tx, batch_size=batch, model=models.MLP))
  line = [f"{'-'.join(map(str, widths))} b{batch}: xla {1e3 * timed(xla, params, tx.init(params), x, y, order):.2f}"]
  for label, kw in (("split (auto)", {}), ("split int_inputs", dict(split=True, int_inputs=True)), ("fma hb16", dict(hidden_block=16, split=False))):
    plan = mlp_epoch.make_plan(widths, batch, steps, max_programs=fused_epoch.max_programs(), **kw)
    fn = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
    t = time.perf_counter(); fn.lower(params, None, x, y, order, lr, 0.9).compile(); c = time.perf_counter() - t
    line.append(f"{label} hb{plan.hidden_block} {1e3 * timed(fn, params, None, x, y, order, lr, 0.9):.2f} (compile {c:.0f} s)")
  print("  ".join(line), flush=True)
print(f"total {time.perf_counter() - T0:.0f} s")
