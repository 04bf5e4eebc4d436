"""On the CPU (jax 0.10.2): the kernel's jnp twin in float32 on the failing draw (--seed=896467452,
20 steps, one set of batches), each member's distance from float64 train steps."""
import numpy as np, jax, jax.numpy as jnp
from experiments import check_kernels as ck
from jaxshallow import models
from pallas_kernels.fused import stream_population_mgpu as k
rng = np.random.default_rng(896467452)
for steps, shared in ck.STREAM_POPULATION_CASES:
  draws = [ck._mlp_inputs(rng, (784, 256, 10), steps, 64) for _ in range(3)]
x, y = draws[0][0], draws[0][1]
orders = np.stack([draws[0][2]])
params = jax.tree.map(lambda *a: jnp.stack(a), *[d[3] for d in draws])
xs, onehot = k.batches(jnp.asarray(x), jnp.asarray(y), jnp.asarray(orders), 20)
lrs=[0.05,0.1,0.2]
got, losses, _ = jax.jit(k.reference)(params, jnp.float32(lrs), xs, onehot)
for i in range(3):
  inputs = (draws[i][3], x, y, orders[0], lrs[i], "sgd", 64, models.MLP, 20)
  ref = ck._epoch_reference(*inputs)
  print(i, "twin f32", f"{ck._distance(losses[i], [a[i] for a in jax.tree.leaves(got)], *ref):.2e}")
  print("  leaves", [f"{ck.rel_err(a[i],b):.1e}" for a, b in zip(jax.tree.leaves(got), ref[1])])
  print("  per step", [f"{abs(a-b)/abs(b):.1e}" for a, b in zip(np.asarray(losses[i]), ref[0])])
