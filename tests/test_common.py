"""pallas_kernels.common's helpers."""

import jax
import numpy as np
import pytest

@pytest.mark.parametrize("n", [1, 20, 33, 704])
def test_sum_many_parts_adds_every_part(n):
  """Runs of 16, then their sums: every part counted once, the padding none."""
  from pallas_kernels import common
  parts = np.random.default_rng(n).standard_normal((n, 3, 5)).astype(np.float32)
  got = jax.jit(common.sum_many_parts)(parts)
  np.testing.assert_allclose(got, parts.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
