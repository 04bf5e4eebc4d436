import numpy as np, jax, jax.numpy as jnp
from experiments import check_kernels as ck
from pallas_kernels.fused import cluster_mlp_mgpu as c
def fake(params, x, labels, order, lr, *, steps, precision="float32"):
  xs, onehot = c.batches(x, labels, order, steps)
  h = params[0]["w"].shape[1]; units = 256 * -(-h // 256)
  p, l, k = c.reference(c.pad_hidden(params, units), xs.astype(jnp.float32), onehot.astype(jnp.float32), lr)
  return c.unpad_hidden(p, h), l, k
c.train_epoch = fake
for case, precision, err, *bound in ck.cluster_groups_cases(np.random.default_rng(12)):
  print(case, f"{err:.2e}", bound, flush=True)
