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
print("## 20 steps against float64 (relative loss distance, max over steps)", flush=True)
for seed in (1, 2):
  for widths, batch, opt, hb in NETS:
    if time.perf_counter() - T0 > 200: print("time up"); break
    rng = np.random.default_rng(seed)
    n = 20 * batch + 5
    x = rng.integers(0, 256, (n, widths[0]), dtype=np.uint8); y = rng.integers(0, widths[-1], n).astype(np.int32)
    order = rng.permutation(n).astype(np.int32); lr = 1e-3 if opt == "adam" else 0.1
    params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths)
    ref_losses, ref_params = ck._epoch_reference(params, x, y, order, lr, opt, batch, models.MLP, 20)
    plan = mlp_epoch.make_plan(widths, batch, 20, momentum=opt == "momentum", adam=opt == "adam",
                               max_programs=fused_epoch.max_programs(), hidden_block=hb, split=True, int_inputs=True)
    fn = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
    got, _, a, _ = fn(params, None, x, y, order, lr, 0.9); b = fn(params, None, x, y, order, lr, 0.9)[2]
    err = max(ck.rel_err(a, ref_losses), *(ck.rel_err(u, v) for u, v in zip(jax.tree.leaves(got), ref_params)))
    tx = train.make_optimizer(opt, lr); step = jax.jit(functools.partial(train.train_step, tx=tx, model=models.MLP))
    p, s, xl = params, tx.init(params), []
    xs = jnp.asarray(x, jnp.float32) / 255.0
    for i in range(20):
      idx = order[i * batch:(i + 1) * batch]; p, s, m = step(p, s, (xs[idx], y[idx])); xl.append(float(m["loss"]))
    rel = lambda v: float(np.max(np.abs(np.asarray(v) - ref_losses) / np.abs(ref_losses)))
    print(f"seed {seed} {'-'.join(map(str, widths))} b{batch} {opt} hb{plan.hidden_block} split={plan.split}: "
          f"check_kernels err {err:.2e} ({'ok' if err < 1e-5 else 'FAIL'}), loss dist kernel {rel(a):.1e} xla f32 {rel(xl):.1e}, same bits {np.array_equal(np.asarray(a), np.asarray(b))}", flush=True)
print("## epoch times, ms", flush=True)
rng = np.random.default_rng(0)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
order = jnp.asarray(rng.permutation(60000).astype(np.int32))
for widths, batch, lr in [((784, 512, 10), 64, 0.5), ((784, 1024, 10), 64, 0.5), ((784, 512, 256, 10), 64, 0.1),
                          ((784, 256, 1024, 256, 10), 64, 0.1), ((784, 256, 10), 128, 0.5), ((784, 2048, 10), 64, 0.5)]:
  if time.perf_counter() - T0 > 470: print("time up"); break
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
