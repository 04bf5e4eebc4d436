import time, sys, hashlib, jax, jax.numpy as jnp
from pallas_kernels.fused import cluster_mlp_mgpu
f32 = jnp.float32
layer = lambda n, m: {"w": jax.ShapeDtypeStruct((n, m), f32), "b": jax.ShapeDtypeStruct((m,), f32)}
hidden = int(sys.argv[1]) if len(sys.argv) > 1 else 256
fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, "float32"))
t = time.perf_counter()
text = fn.trace([layer(784, hidden), layer(hidden, 10)], jax.ShapeDtypeStruct((937, 64, 832), jnp.bfloat16),
                jax.ShapeDtypeStruct((937, 10, 64), jnp.bfloat16)).lower(lowering_platforms=("cuda",)).as_text()
print(jax.__version__, hidden, f"lowering {time.perf_counter() - t:.1f} s", len(text), flush=True)
