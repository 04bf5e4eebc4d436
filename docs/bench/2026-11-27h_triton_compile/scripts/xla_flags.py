"""The grid epoch kernel of softmax regression (784-10, batch 64, 937 steps) compiled by XLA
under several XLA_FLAGS, one fresh process each: compile s and the epoch's ms (median of 5)."""
import os, subprocess, sys
if len(sys.argv) > 1 and sys.argv[1] == "child":
  import functools, statistics, time
  import jax, jax.numpy as jnp, numpy as np
  from pallas_kernels.fused import mlp_epoch
  from jaxshallow import init_mlp
  plan = mlp_epoch.make_plan((784, 10), 64, 937, max_programs=132)
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
  f = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan, fused=True))
  args = (init_mlp(jax.random.key(0), (784, 10)), None, x, y, jnp.arange(60000, dtype=jnp.int32), 0.1, 0.0)
  t = time.perf_counter(); c = f.trace(*args).lower().compile(); comp = time.perf_counter() - t
  out = jax.block_until_ready(c(*args[:1], *args[2:]) if False else f(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(f(*args)); ts.append(time.perf_counter() - t)
  loss = float(np.asarray(jax.tree.leaves(out)[-1]).ravel()[0]) if False else 0.0
  print(f"compile {comp:.2f} s  epoch {1e3 * statistics.median(ts):.2f} ms", flush=True)
  sys.exit(0)
for flags in ["", "--xla_llvm_disable_expensive_passes=true",
              "--xla_gpu_enable_llvm_module_compilation_parallelism=true",
              "--xla_gpu_disable_gpuasm_optimizations=true"]:
  env = dict(os.environ, XLA_FLAGS=flags)
  try:
    r = subprocess.run([sys.executable, __file__, "child"], env=env, capture_output=True, text=True, timeout=45)
    print(f"[{flags or 'default'}] rc {r.returncode}", r.stdout.strip(), "" if r.returncode == 0 else r.stderr.strip()[-300:], flush=True)
  except subprocess.TimeoutExpired:
    print(f"[{flags}] over 45 s", flush=True)
