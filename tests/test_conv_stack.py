"""pallas_kernels.ops.conv_stack (two convolutions and the pool) against float64 and the two ops
it fuses (interpret mode on CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import ops
from kernel_checks import (SMALL_BLOCKS, TOL, WIDE, clear_of_pool_ties, conv_pre_activation64,
                           reference_vjp, rel_err)
from pallas_kernels.ops import conv, conv_pool, conv_stack

@pytest.mark.parametrize("n,h,c0,c1,c2,blocks", [
    (1, 28, 1, 16, 32, None), (3, 9, 2, 4, 3, SMALL_BLOCKS), (2, 10, 3, 5, 7, WIDE)])
def test_conv_stack_forward_and_grads(n, h, c0, c1, c2, blocks):
  """Both convolutions and the pool against float64, the lower dw from inside the upper dx
  kernel; x gets a zero cotangent. The lower ReLU's mask in the reference is the kernel's own
  (from its float32 forward), so that a pre-activation within rounding of 0 cannot flip it."""
  rng = np.random.default_rng()
  x = rng.standard_normal((n, h, h, c0), np.float32)
  w1 = (rng.standard_normal((3, 3, c0, c1)) / np.sqrt(9 * c0)).astype(np.float32)
  b1 = (0.1 * rng.standard_normal(c1)).astype(np.float32)
  w2 = (rng.standard_normal((3, 3, c1, c2)) / np.sqrt(9 * c1)).astype(np.float32)
  b2 = (0.1 * rng.standard_normal(c2)).astype(np.float32)
  dy = np.abs(rng.standard_normal((n, (h - 4) // 2, (h - 4) // 2, c2))).astype(np.float32)
  mask = np.asarray(conv.conv_relu(x, w1, b1, blocks=blocks, interpret=True)) > 0  # The op's own.
  z2 = conv_pre_activation64(np.where(mask, conv_pre_activation64(x, w1, b1), 0.0), w2, b2)
  dy = clear_of_pool_ties(dy, z2)
  y, vjp = jax.vjp(lambda *a: conv_stack.conv_stack(*a, blocks=blocks, interpret=True),
                   x, w1, b1, w2, b2)
  grads = vjp(jnp.asarray(dy))

  def reference(x, w1, b1, w2, b2):
    z1 = jax.lax.conv_general_dilated(x, w1, (1, 1), "VALID", precision="highest",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC")) + b1
    return conv_pool.reference(jnp.where(mask, z1, 0.0), w2, b2)

  y64, grads64 = reference_vjp(reference, [x, w1, b1, w2, b2], dy)
  assert rel_err(y, y64) < TOL
  assert not np.any(np.asarray(grads[0]))
  for g, g64 in zip(grads[1:], grads64[1:]):
    assert rel_err(g, g64) < TOL


def test_conv_stack_matches_the_two_ops():
  """The same values and weight gradients as conv_relu then conv_relu_pool (xla and Pallas).
  Float32 against float32 on fixed inputs: a fresh draw's ReLU or pool near-tie would move dw
  by 1e-1 (the float64 test above clears them)."""
  rng = np.random.default_rng(0)
  x = rng.random((2, 14, 14, 1), np.float32)
  args = [x, (rng.standard_normal((3, 3, 1, 8)) / 3).astype(np.float32),
          np.full(8, 0.05, np.float32),
          (rng.standard_normal((3, 3, 8, 4)) / 8.5).astype(np.float32),
          np.full(4, 0.05, np.float32)]
  dy = rng.standard_normal((2, 5, 5, 4)).astype(np.float32)
  two_ops = lambda x, w1, b1, w2, b2: ops.conv_relu_pool(ops.conv_relu(x, w1, b1), w2, b2)
  want_y, want_vjp = jax.vjp(two_ops, *args)
  want = want_vjp(jnp.asarray(dy))[1:]
  for impl in ("xla", "pallas"):
    f = ops.get_ops(impl).conv_stack
    y, vjp = jax.vjp(f, *args)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    for g, g_want in zip(vjp(jnp.asarray(dy))[1:], want):
      np.testing.assert_allclose(g, g_want, rtol=1e-4, atol=1e-5)
