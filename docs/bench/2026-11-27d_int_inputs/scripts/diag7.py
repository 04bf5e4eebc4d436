"""Case 12 of check_kernels' epoch cases (784-256-1024-256-10, batch 64, SGD, split hb32) on the GPU:
its 20 steps against float64 at seeds 7-11, run three times (same bits?), beside FMA hb16 and xla float32."""
import functools, time, numpy as np, jax, jax.numpy as jnp
from jaxshallow import mlp, models, train
from jaxshallow.fused import epoch as fused_epoch
from pallas_kernels.fused import mlp_epoch
from experiments import check_kernels as ck
T0 = time.perf_counter()
def inputs(seed, case=12):
  rng = np.random.default_rng(seed)
  for i, (widths, batch, optimizer, *block) in enumerate(ck.EPOCH_CASES):
    head = "mse" if widths[-1] == 1 else "xent"
    n = ck.EPOCH_STEPS * batch + 5
    if head == "xent":
      x = rng.integers(0, 256, (n, widths[0]), dtype=np.uint8); y = rng.integers(0, widths[-1], n).astype(np.int32)
    else:
      x = rng.uniform(-1, 1, (n, widths[0])).astype(np.float32); y = (x ** 2).sum(1).astype(np.float32)
    order = rng.permutation(n).astype(np.int32)
    params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths, bias=head == "xent")
    if i == case: return widths, batch, x, y, order, params
widths, batch = ck.EPOCH_CASES[12][:2]
fns = {}
for label, kw in (("split hb32", {}), ("fma hb16", dict(hidden_block=16, split=False))):
  plan = mlp_epoch.make_plan(widths, batch, 20, max_programs=fused_epoch.max_programs(), **kw)
  fns[label] = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan))
tx = train.make_optimizer("sgd", 0.1); step = jax.jit(functools.partial(train.train_step, tx=tx, model=models.MLP))
def dist(losses, ref): 
  d = np.abs(np.asarray(losses, np.float64) - ref) / np.abs(ref); bad = np.nonzero(d > 1e-5)[0]
  return f"max {d.max():.1e} first step >1e-5: {bad[0] if len(bad) else '-'}"
for seed in (7, 8, 9, 10, 11, 12):
  if time.perf_counter() - T0 > 150: print("time up"); break
  widths, batch, x, y, order, params = inputs(seed)
  ref_l, ref_p = ck._epoch_reference(params, x, y, order, 0.1, "sgd", batch, models.MLP)
  line = [f"seed {seed}:"]
  for label, fn in fns.items():
    runs = [fn(params, None, x, y, order, 0.1, 0.9) for _ in range(3 if label == "split hb32" else 1)]
    err = max(ck.rel_err(runs[0][2], ref_l), *(ck.rel_err(a, b) for a, b in zip(jax.tree.leaves(runs[0][0]), ref_p)))
    same = all(np.array_equal(np.asarray(r[2]), np.asarray(runs[0][2])) for r in runs)
    line.append(f"{label} err {err:.1e} ({dist(runs[0][2], ref_l)}) same bits x{len(runs)} {same};")
  p, xs, ls = params, jnp.asarray(x, jnp.float32) / 255.0, []
  s = tx.init(p)
  for k in range(20):
    idx = order[k * batch:(k + 1) * batch]; p, s, m = step(p, s, (xs[idx], y[idx])); ls.append(float(m["loss"]))
  err = max(ck.rel_err(np.array(ls), ref_l), *(ck.rel_err(a, b) for a, b in zip(jax.tree.leaves(p), ref_p)))
  line.append(f"xla f32 err {err:.1e} ({dist(ls, ref_l)})")
  print(" ".join(line), flush=True)
