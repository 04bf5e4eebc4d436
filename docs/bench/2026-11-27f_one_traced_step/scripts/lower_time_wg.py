import time, sys, jax, jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu
from pallas_kernels.fused import cluster_mlp_mgpu
if sys.argv[1] == "wg":
  cluster_mlp_mgpu.semantics = lambda: plgpu.LoweringSemantics.Warpgroup
f32 = jnp.float32
layer = lambda n, m: {"w": jax.ShapeDtypeStruct((n, m), f32), "b": jax.ShapeDtypeStruct((m,), f32)}
fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, "float32"))
t = time.perf_counter()
text = fn.trace([layer(784, 256), layer(256, 10)], jax.ShapeDtypeStruct((937, 64, 832), jnp.bfloat16),
                jax.ShapeDtypeStruct((937, 10, 64), jnp.bfloat16)).lower(lowering_platforms=("cuda",)).as_text()
print(jax.__version__, sys.argv[1], f"lowering {time.perf_counter() - t:.1f} s", len(text), flush=True)
