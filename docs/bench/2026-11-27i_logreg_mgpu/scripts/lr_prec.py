"""logreg_mgpu (the defaults of 2026-11-27) against the grid epoch kernel at each precision, on
the H100, one process, alternating: ms an epoch of 937 steps (median of 9), compile s."""
import functools, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import mlp
from pallas_kernels.fused import logreg_mgpu as k, mlp_epoch
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
rng = np.random.default_rng(3)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
order = jnp.asarray(rng.permutation(60000).astype(np.int32))
params = mlp.init_mlp(jax.random.key(1), (784, 10))
# argv: precisions (default all three); "sem" times Lane against Warpgroup semantics instead.
if sys.argv[1:] == ["sem"]:
  fns = {}
  for sem in ("Lane", "Warpgroup"):
    k.SEMANTICS = sem; k._call.cache_clear(); t = time.perf_counter()
    fns[sem] = jax.jit(functools.partial(k.train_epoch, lr=0.1, steps=937)).lower(params, x, y, order).compile()
    print(f"{sem} compile {time.perf_counter() - t:.1f} s", flush=True)
  ts = {n: [] for n in fns}
  for f in fns.values():
    jax.block_until_ready(f(params, x, y, order))
  for _ in range(9):
    for n, f in fns.items():
      t = time.perf_counter(); jax.block_until_ready(f(params, x, y, order)); ts[n].append(time.perf_counter() - t)
  same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(
      jax.tree.leaves(fns["Lane"](params, x, y, order)), jax.tree.leaves(fns["Warpgroup"](params, x, y, order))))
  print("ms an epoch: " + ", ".join(f"{n} {1e3 * statistics.median(v):.3f}" for n, v in ts.items()) + f"; same bits {same}", flush=True)
  sys.exit(0)
for precision in (sys.argv[1:] or ("float32", "tf32", "bfloat16")):
  t = time.perf_counter()
  fn = jax.jit(functools.partial(k.train_epoch, lr=0.1, steps=937, precision=precision)).lower(
      params, x, y, order).compile()
  kc = time.perf_counter() - t
  plan = mlp_epoch.make_plan((784, 10), 64, 937, precision=precision, max_programs=132)
  gargs = (params, None, x, y, order, 0.1, 0.0)
  t = time.perf_counter()
  g = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan, fused=True)).lower(*gargs).compile()
  gc = time.perf_counter() - t
  runs = {"logreg_mgpu": lambda: fn(params, x, y, order), "grid": lambda: g(*gargs)}
  ts = {n: [] for n in runs}
  for f in runs.values():
    jax.block_until_ready(f())
  for _ in range(9):
    for n, f in runs.items():
      t = time.perf_counter(); jax.block_until_ready(f()); ts[n].append(time.perf_counter() - t)
  loss = {n: float(jnp.mean(f()[1 if n == "logreg_mgpu" else 2])) for n, f in runs.items()}
  print(f"{precision:9s} logreg_mgpu {1e3 * statistics.median(ts['logreg_mgpu']):.3f} ms "
        f"(compile {kc:.1f} s, loss {loss['logreg_mgpu']:.4f}); grid {1e3 * statistics.median(ts['grid']):.3f} ms "
        f"(compile {gc:.1f} s, loss {loss['grid']:.4f})", flush=True)
