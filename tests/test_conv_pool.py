"""pallas_kernels.ops.conv_pool (conv_relu_pool) against float64 and XLA (interpret mode on
CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import ops
from kernel_checks import (TOL, WIDE, clear_of_pool_ties, conv_pre_activation64, reference_vjp,
                           rel_err)
from pallas_kernels.ops import conv_pool

DIRECT = (("winograd", False),)  # conv_relu_pool's forward as nine taps' products a position.


@pytest.mark.parametrize("n,h,cin,cout,blocks", [
    (2, 14, 16, 32, None), (3, 9, 5, 7, None), (1, 8, 1, 16, None),
    (3, 9, 5, 7, (("block_q", 16), ("num_warps", 2))), (2, 11, 3, 1, WIDE),
    (3, 11, 5, 7, (("block_q", 8), ("patch", True))), (2, 14, 16, 32, DIRECT),
    (3, 11, 5, 7, (("block_q", 8), ("winograd", False)))])
def test_conv_relu_pool_forward_and_grads(n, h, cin, cout, blocks):
  """The fused conv + ReLU + pool against max_pool(conv_relu) in float64; odd conv outputs (9x9
  from 11x11) drop their last row and column, as the pool does. float32's forward is Winograd's
  F(2x2, 3x3) by default, ``winograd=False`` the direct sum of the nine taps; ``patch``: the
  direct form's loads by input offset (the tensor-core precisions' default)."""
  rng = np.random.default_rng()
  x = rng.standard_normal((n, h, h, cin), np.float32)
  w = (rng.standard_normal((3, 3, cin, cout)) / np.sqrt(9 * cin)).astype(np.float32)
  b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
  # Non-negative, as in the conv test: with one output channel db is one sum of signed terms that
  # can cancel (seen in CI: 1.3e-5 on a db of 0.0272). The kernels are linear in dy.
  dy = np.abs(rng.standard_normal((n, (h - 2) // 2, (h - 2) // 2, cout))).astype(np.float32)
  dy = clear_of_pool_ties(dy, conv_pre_activation64(x, w, b))  # ReLU kinks and pool near-ties
  y, vjp = jax.vjp(lambda *a: conv_pool.conv_relu_pool(*a, blocks=blocks, interpret=True), x, w, b)
  y64, grads64 = reference_vjp(conv_pool.reference, [x, w, b], dy)
  assert rel_err(y, y64) < TOL
  for g, g64 in zip(vjp(jnp.asarray(dy)), grads64):
    assert rel_err(g, g64) < TOL


def test_conv_relu_pool_ties_and_relu_kink_match_xla():
  """Windows whose four values tie (blank patches: exactly 0 after ReLU, or equal positives)
  send the gradient where XLA's max_pool(conv_relu) sends it."""
  x = np.zeros((1, 6, 6, 1), np.float32)
  x[0, :, 3:, 0] = 1.0  # Right half constant: equal positive outputs in whole windows.
  w = np.ones((3, 3, 1, 2), np.float32)
  b = np.array([0.0, -100.0], np.float32)  # Channel 1 never positive.
  dy = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 2, 2)
  got = jax.vjp(lambda *a: conv_pool.conv_relu_pool(*a, interpret=True), x, w, b)[1](dy)
  want = jax.vjp(lambda *a: ops.max_pool(ops.conv_relu(*a)), x, w, b)[1](dy)
  for g, g_want in zip(got, want):
    np.testing.assert_allclose(g, g_want, rtol=1e-6, atol=1e-6)
