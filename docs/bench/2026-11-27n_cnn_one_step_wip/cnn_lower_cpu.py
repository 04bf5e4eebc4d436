import time, jax, jax.numpy as jnp, numpy as np
from jaxshallow import cnn, train, models
params = cnn.init_cnn(jax.random.key(0), image_size=28)
tx = train.make_optimizer("momentum", 0.05)
n = 6400
images = jax.ShapeDtypeStruct((n, 28, 28), jnp.uint8); labels = jax.ShapeDtypeStruct((n,), jnp.int32)
order = jax.ShapeDtypeStruct((n,), jnp.int32)
fn = jax.jit(train._epoch, static_argnames=train._EPOCH_STATIC)
t = time.perf_counter()
tr = fn.trace(params, tx.init(params), images, labels, order, tx=tx, batch_size=64, impl="pallas", model=models.CNN, fusion="step")
t1 = time.perf_counter()
low = tr.lower(lowering_platforms=("cuda",))
t2 = time.perf_counter()
txt = low.as_text()
print(f"trace {t1-t:.2f}s lower {t2-t1:.2f}s  triton calls {txt.count('__gpu$xla.gpu.triton')} text {len(txt)}")
