"""logreg_mgpu on the H100 (first run): against its float64 twin over 20 steps, the same bits
twice, compile s and epoch ms; argv[1]: warpgroups (2, else 1)."""
import functools, statistics, sys, time, subprocess
if len(sys.argv) > 1:
  import jax, jax.numpy as jnp, numpy as np
  from pallas_kernels.fused import logreg_mgpu as k
  from jaxshallow import mlp
  k.WARPGROUPS = int(sys.argv[1])
  rng = np.random.default_rng(3)
  x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
  order = jnp.asarray(rng.permutation(60000).astype(np.int32))
  params = mlp.init_mlp(jax.random.key(1), (784, 10))
  params = jax.tree.map(lambda a: a + 0.01 * jnp.asarray(rng.standard_normal(a.shape), a.dtype), params)
  xs, oh = k.batches(x, y, order, 20)
  got = jax.jit(lambda p, a, b: k.train_steps(p, a, b, 0.1))(params, xs, oh)
  again = jax.jit(lambda p, a, b: k.train_steps(p, a, b, 0.1))(params, xs, oh)
  with jax.enable_x64():
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    ref = k.reference(p64, jnp.asarray(np.asarray(xs, np.float64)), jnp.asarray(np.asarray(oh, np.float64)), 0.1)
    ref = jax.tree.map(np.asarray, ref)
  f32 = k.reference(params, xs.astype(jnp.float32), oh.astype(jnp.float32), 0.1)
  def dist(a, b): return max(float(np.max(np.abs(np.asarray(u, np.float64) - np.asarray(v, np.float64))) / (np.max(np.abs(np.asarray(v, np.float64))) + 1e-30)) for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
  same = all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in zip(jax.tree.leaves(got), jax.tree.leaves(again)))
  print(f"wg={k.WARPGROUPS} 20 steps vs float64: {dist(got, ref):.2e} (float32 twin {dist(f32, ref):.2e}); same bits twice: {same}", flush=True)
  fn = jax.jit(functools.partial(k.train_epoch, lr=0.1, steps=937))
  t = time.perf_counter(); fn.lower(params, x, y, order).compile(); comp = time.perf_counter() - t
  out = fn(params, x, y, order); jax.block_until_ready(out); ts = []
  for _ in range(7):
    t = time.perf_counter(); jax.block_until_ready(fn(params, x, y, order)); ts.append(time.perf_counter() - t)
  print(f"wg={k.WARPGROUPS} epoch {1e3 * statistics.median(ts):.2f} ms (compile {comp:.1f} s); mean loss {float(jnp.mean(out[1])):.4f}", flush=True)
  if k.WARPGROUPS == 2 and len(sys.argv) > 2:  # The grid epoch kernel beside it, same process
    from pallas_kernels.fused import mlp_epoch
    plan = mlp_epoch.make_plan((784, 10), 64, 937, max_programs=132)
    g = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan, fused=True))
    gargs = (params, None, x, y, order, 0.1, 0.0)
    t = time.perf_counter(); g.lower(*gargs).compile(); gcomp = time.perf_counter() - t
    jax.block_until_ready(g(*gargs)); gs, ks = [], []
    for _ in range(7):
      t = time.perf_counter(); jax.block_until_ready(g(*gargs)); gs.append(time.perf_counter() - t)
      t = time.perf_counter(); jax.block_until_ready(fn(params, x, y, order)); ks.append(time.perf_counter() - t)
    print(f"alternating: logreg_mgpu {1e3 * statistics.median(ks):.2f} ms, grid kernel {1e3 * statistics.median(gs):.2f} ms (compile {gcomp:.1f} s)", flush=True)
  sys.exit(0)
import jax; print(jax.devices()[0].device_kind, jax.__version__, flush=True)
for wg in ("2", "1"):
  try:
    r = subprocess.run([sys.executable, __file__, wg, "grid"], capture_output=True, text=True, timeout=70)
    print(r.stdout.strip(), "" if r.returncode == 0 else f"rc {r.returncode} " + r.stderr.strip()[-400:], flush=True)
  except subprocess.TimeoutExpired:
    print(f"wg={wg}: over 70 s (a hang?)", flush=True)
