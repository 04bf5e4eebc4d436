"""pallas_kernels.ops.mse against a float64 reference (interpret mode on CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import ops
from kernel_checks import TOL, reference_vjp, rel_err
from pallas_kernels.ops import mse

@pytest.mark.parametrize("n", [1, 256, 2000])
def test_mse_and_grad(n):
  rng = np.random.default_rng()
  p, t = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
  g = np.float32(rng.uniform(0.5, 2))
  loss, vjp = jax.vjp(lambda p: mse.mse(p, t, interpret=True), p)
  loss64, (dp64,) = reference_vjp(lambda p: ops.mse(p, jnp.asarray(t, jnp.float64)), [p], g)
  assert rel_err(loss, loss64) < TOL
  assert rel_err(vjp(g)[0], dp64) < TOL
