"""pallas_kernels.ops.max_pool against its reference and XLA (interpret mode on CPU)."""

import jax
import numpy as np
import pytest

from jaxshallow import ops
from pallas_kernels.ops import max_pool

@pytest.mark.parametrize("n,h,c", [(1, 24, 32), (3, 7, 5), (64, 24, 32), (2, 6, 1)])
def test_max_pool_forward_and_grad(n, h, c):
  rng = np.random.default_rng()
  x = rng.standard_normal((n, h, h, c), np.float32)
  dy = rng.standard_normal((n, h // 2, h // 2, c), np.float32)
  y, vjp = jax.vjp(lambda x: max_pool.max_pool(x, interpret=True), x)
  y_ref, vjp_ref = jax.vjp(max_pool.reference, x)
  np.testing.assert_array_equal(y, y_ref)  # A max is exact.
  np.testing.assert_array_equal(vjp(dy)[0], vjp_ref(dy)[0])


def test_max_pool_ties_go_to_the_first():
  x = np.zeros((1, 2, 2, 1), np.float32)  # Four equal values: the first position wins.
  dx = jax.grad(lambda x: max_pool.max_pool(x, interpret=True).sum())(x)
  assert dx.ravel().tolist() == [1.0, 0.0, 0.0, 0.0]
  assert dx.ravel().tolist() == jax.grad(lambda x: ops.max_pool(x).sum())(x).ravel().tolist()
