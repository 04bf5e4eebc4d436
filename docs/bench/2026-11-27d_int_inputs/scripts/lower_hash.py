import time, sys, hashlib, jax, jax.numpy as jnp
jax.config.update("jax_traceback_in_locations_limit", 0)
from jax._src import source_info_util  # no_locations: the comparison ignores source lines
source_info_util.user_frame = lambda *a, **k: None
source_info_util.user_frames = lambda *a, **k: iter(())
from pallas_kernels.fused import cluster_mlp_mgpu
f32 = jnp.float32
layer = lambda n, m: {"w": jax.ShapeDtypeStruct((n, m), f32), "b": jax.ShapeDtypeStruct((m,), f32)}
for precision, steps in (("float32", 937), ("bfloat16", 3)):
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, precision))
  t = time.perf_counter()
  text = fn.trace([layer(784, 256), layer(256, 10)], jax.ShapeDtypeStruct((steps, 64, 832), jnp.bfloat16),
                  jax.ShapeDtypeStruct((steps, 10, 64), jnp.bfloat16)).lower(lowering_platforms=("cuda",)).as_text()
  print(jax.__version__, precision, f"{time.perf_counter() - t:.1f} s", hashlib.sha256(text.encode()).hexdigest()[:16], flush=True)
stack = lambda s, n: jax.ShapeDtypeStruct((n,) + s.shape, s.dtype)
fn = jax.jit(lambda p, x, o, lrs: cluster_mlp_mgpu.train_population(p, x, o, lrs))
t = time.perf_counter()
text = fn.trace(jax.tree.map(lambda s: stack(s, 3), [layer(784, 256), layer(256, 10)]),
                jax.ShapeDtypeStruct((3, 3, 64, 832), jnp.bfloat16), jax.ShapeDtypeStruct((3, 3, 10, 64), jnp.bfloat16),
                jax.ShapeDtypeStruct((3,), f32)).lower(lowering_platforms=("cuda",)).as_text()
print(jax.__version__, "population", f"{time.perf_counter() - t:.1f} s", hashlib.sha256(text.encode()).hexdigest()[:16], flush=True)
