"""Is a float32 failure of the grid epoch kernel against float64 over 20 steps chaos or a bug?
Per case (check_kernels' inputs, seeded): the kernel twice (same bits?), float64 steps, and xla's
float32 steps; per step each float32 run's loss distance from float64 (relative)."""
import functools, sys, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import mlp, models, train
from jaxshallow.fused import epoch as fused_epoch
from pallas_kernels.fused import mlp_epoch
from experiments import check_kernels as ck
T0 = time.perf_counter()
CASES = [((784, 256, 10), 256, "momentum", None, None), ((784, 256, 1024, 256, 10), 64, "sgd", None, None),
         ((784, 256, 1024, 256, 10), 64, "sgd", 16, False), ((784, 1024, 10), 64, "sgd", None, None),
         ((784, 512, 10), 64, "adam", None, None), ((784, 256, 256, 10), 64, "sgd", 32, True),
         ((784, 256, 256, 10), 64, "sgd", 16, False)]
for seed in (1, 2):
  for widths, batch, opt, hb, x3 in CASES:
    if time.perf_counter() - T0 > 420: print("time up"); break
    rng = np.random.default_rng(seed)
    n = 20 * batch + 5
    x = rng.integers(0, 256, (n, widths[0]), dtype=np.uint8); y = rng.integers(0, widths[-1], n).astype(np.int32)
    order = rng.permutation(n).astype(np.int32); lr = 1e-3 if opt == "adam" else 0.1
    params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths)
    ref_losses, _ = ck._epoch_reference(params, x, y, order, lr, opt, batch, models.MLP, 20)
    plan = mlp_epoch.make_plan(widths, batch, 20, momentum=opt == "momentum", adam=opt == "adam",
                               max_programs=fused_epoch.max_programs(), hidden_block=hb, x3=x3)
    fn = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
    a = np.asarray(fn(params, None, x, y, order, lr, 0.9)[2]); b = np.asarray(fn(params, None, x, y, order, lr, 0.9)[2])
    tx = train.make_optimizer(opt, lr); step = jax.jit(functools.partial(train.train_step, tx=tx, model=models.MLP))
    p, s, xl = params, tx.init(params), []
    xs = jnp.asarray(x, jnp.float32) / 255.0
    for i in range(20):
      idx = order[i * batch:(i + 1) * batch]; p, s, m = step(p, s, (xs[idx], y[idx])); xl.append(float(m["loss"]))
    rel = lambda v: np.abs(np.asarray(v) - ref_losses) / np.abs(ref_losses)
    k, q = rel(a), rel(xl)
    print(f"seed {seed} {'-'.join(map(str, widths))} b{batch} {opt} hb{plan.hidden_block} x3={plan.x3}: same bits {np.array_equal(a, b)}; "
          f"kernel max {k.max():.1e} (first step >1e-5: {int(np.argmax(k > 1e-5)) if (k > 1e-5).any() else '-'}), xla f32 max {q.max():.1e} "
          f"(first >1e-5: {int(np.argmax(q > 1e-5)) if (q > 1e-5).any() else '-'}); kernel by step {' '.join(f'{v:.0e}' for v in k[::3])}", flush=True)
