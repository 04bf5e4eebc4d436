"""The grid epoch kernel's products as 3xTF32 (tensor cores, float32 accuracy) against IEEE
float32 (FMA units): each network's epoch on random data of its workload's size, xla's scan
beside it, median of 5 epochs after a warm-up, compile apart; then 3xTF32's error over 20 steps
against float64 (check_kernels' reference). One process. argv[1]: which group of networks."""
import functools, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import init_mlp, make_optimizer, models, train
from jaxshallow.fused import epoch as fused_epoch
from pallas_kernels.fused import mlp_epoch
from experiments import check_kernels as ck
T0 = time.perf_counter()
GROUPS = {
  "wide": [((784, 1024, 10), 64, 0.5, (16, 64)), ((784, 512, 10), 64, 0.5, (16, 32)),
           ((784, 256, 1024, 256, 10), 64, 0.1, (16, 32)), ((784, 512, 256, 10), 64, 0.1, (16,)),
           ((784, 2048, 10), 64, 0.5, (16, 64))],
  "more": [((784, 512, 256, 10), 64, 0.1, (("float32x3", 32),)),
           ((784, 256, 1024, 256, 10), 64, 0.1, (("float32x3", 64),)),
           ((784, 2048, 10), 64, 0.5, (("float32x3", 64), ("float32x3", 32))),
           ((784, 256, 10), 128, 0.5, (("float32", 16), ("float32x3", 16), ("float32x3", 32))),
           ((784, 256, 10), 256, 0.5, (("float32", 16), ("float32x3", 16), ("float32x3", 32))),
           ((784, 256, 10), 512, 0.5, (("float32", 16), ("float32x3", 32))),
           ((32, 1024, 1), 256, 0.002, (("float32", 16), ("float32x3", 16), ("float32x3", 32))),
           ((32, 256, 256, 1), 256, 0.002, (("float32", 16), ("float32x3", 16), ("float32x3", 32))),
           ((32, 256, 1024, 256, 1), 256, 0.002, (("float32x3", 32), ("float32x3", 64)))],
  "batch": [((784, 256, 10), 128, 0.5, (16,)), ((784, 256, 10), 256, 0.5, (16,)),
            ((784, 256, 10), 512, 0.5, (16,)), ((32, 1024, 1), 256, 0.002, (16,)),
            ((32, 256, 256, 1), 256, 0.002, (16,)), ((32, 256, 1024, 256, 1), 256, 0.002, (16,))],
}
LIMIT = float(sys.argv[2]) if len(sys.argv) > 2 else 520
rng = np.random.default_rng(0)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
for widths, batch, lr, hbs in GROUPS[sys.argv[1]]:
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
  combos = hbs if isinstance(hbs[0], tuple) else [(p, hb) for p in ("float32", "float32x3") for hb in hbs]
  for precision, hb in combos:
    if True:
      if time.perf_counter() - T0 > LIMIT:
        line.append(f"{precision} hb{hb} skipped"); continue
      plan = mlp_epoch.make_plan(widths, batch, steps, head="mse" if mse else "xent", bias=not mse,
                                 max_programs=fused_epoch.max_programs(), hidden_block=hb, precision=precision)
      fn = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
      try:
        t = time.perf_counter(); fn.lower(params, None, x, y, order, lr, 0.9).compile(); c = time.perf_counter() - t
        line.append(f"{precision} hb{hb} {1e3 * timed(fn, params, None, x, y, order, lr, 0.9):.2f} ms (P={plan.programs}, compile {c:.0f} s)")
      except Exception as e:
        line.append(f"{precision} hb{hb} failed: {type(e).__name__} {str(e)[:200]}")
  # 3xTF32 against float64 over 20 steps (first hb), as check_kernels does for float32.
  if time.perf_counter() - T0 < LIMIT:
    s20 = 20; xs, ys, o20 = np.asarray(x), np.asarray(y), np.asarray(order[:s20 * batch])
    ref_losses, ref_params = ck._epoch_reference(params, xs, ys, o20, lr, "sgd", batch, model, s20)
    for precision, hb in [c for c in combos if c[0] == "float32x3"][-1:]:
      plan = mlp_epoch.make_plan(widths, batch, s20, head="mse" if mse else "xent", bias=not mse,
                                 max_programs=fused_epoch.max_programs(), hidden_block=hb, precision=precision)
      got, _, losses, _ = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))(params, None, x, y, jnp.asarray(o20), lr, 0.9)
      err = max(ck.rel_err(losses, ref_losses), *(ck.rel_err(a, b) for a, b in zip(jax.tree.leaves(got), ref_params)))
      line.append(f"err20 {precision} hb{hb} {err:.2e}")
  print("  ".join(line), flush=True)
print(f"total {time.perf_counter() - T0:.0f} s")
