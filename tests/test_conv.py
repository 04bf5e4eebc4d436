"""pallas_kernels.ops.conv (conv_relu) against a float64 reference (interpret mode on CPU), and
the ReLU's subgradient at 0 in every impl."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import ops
from kernel_checks import (SMALL_BLOCKS, TOL, WIDE, clear_of_relu_kink, conv_pre_activation64,
                           reference_vjp, rel_err)
from pallas_kernels.ops import conv
from pallas_kernels.ops import dense as dense_lib

# Every shape with the default blocks, and the overrides on the odd and the one-channel shapes
# (batch 64 is test_conv_batch64_mnist_shape). Interpret mode runs each program in turn, so the
# list is kept short: CI runs it on two jax versions.
CONV_CASES = [(1, 28, 1, 16, None), (1, 28, 1, 16, SMALL_BLOCKS), (3, 26, 16, 32, None),
              (3, 9, 5, 20, None), (3, 9, 5, 7, SMALL_BLOCKS), (3, 9, 5, 7, WIDE),
              (1, 6, 3, 1, None), (1, 6, 3, 1, WIDE)]


@pytest.mark.parametrize("n,h,cin,cout,blocks", CONV_CASES)
def test_conv_relu_forward_and_grads(n, h, cin, cout, blocks):
  rng = np.random.default_rng()
  x = rng.standard_normal((n, h, h, cin), np.float32)
  w = (rng.standard_normal((3, 3, cin, cout)) / np.sqrt(9 * cin)).astype(np.float32)
  b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
  # A non-negative cotangent: with one output channel db is a single sum of signed terms that can
  # cancel to near 0, where float32 rounding of the terms alone exceeds a 1e-5 relative error
  # (seen once in CI: 6e-5 on a db of -0.00235). The kernels are linear in dy.
  dy = np.abs(rng.standard_normal((n, h - 2, h - 2, cout))).astype(np.float32)
  dy = clear_of_relu_kink(dy, conv_pre_activation64(x, w, b))
  y, vjp = jax.vjp(lambda *a: conv.conv_relu(*a, blocks=blocks, interpret=True), x, w, b)
  grads = vjp(jnp.asarray(dy))
  y64, grads64 = reference_vjp(lambda *a: conv.reference(*a), [x, w, b], dy)
  assert rel_err(y, y64) < TOL
  for g, g64 in zip(grads, grads64):
    assert rel_err(g, g64) < TOL


def test_conv_batch64_mnist_shape():
  """The CNN's first layer at training size: batch 64, 28x28, 1 -> 16 channels."""
  test_conv_relu_forward_and_grads(64, 28, 1, 16, None)


def test_relu_gradient_at_zero_is_zero_in_every_impl():
  """Blank 3x3 patches with zero biases give pre-activations of exactly 0, common on MNIST's
  background. Each impl must take the same subgradient there (0), or they train different nets."""
  from jaxshallow.reference import numpy_cnn
  rng = np.random.default_rng()
  x = np.zeros((2, 6, 6, 1), np.float32)
  x[0, 3:, 3:, 0] = rng.random((3, 3))  # Some patches blank, some not.
  w = rng.standard_normal((3, 3, 1, 4)).astype(np.float32)
  b = np.zeros(4, np.float32)
  dy = rng.standard_normal((2, 4, 4, 4)).astype(np.float32)
  y, cols = numpy_cnn.conv_relu(x, w, b)
  want = numpy_cnn.conv_relu_backward(dy.reshape(y.shape), y, cols, w, x.shape)
  for f in (ops.conv_relu, lambda *a: conv.conv_relu(*a, interpret=True)):
    grads = jax.vjp(f, x, w, b)[1](jnp.asarray(dy))
    for g, g_want in zip(grads, want):  # dx's sums of signed terms can cancel: Frobenius
      assert rel_err(g, np.reshape(g_want, g.shape)) < 1e-5
    assert np.all(np.asarray(grads[0])[np.reshape(want[0], x.shape) == 0] == 0)  # The kink: 0
  w2 = rng.standard_normal((2, 4)).astype(np.float32)
  x2 = np.zeros((3, 2), np.float32)  # Every pre-activation exactly 0.
  for f in (ops.dense, lambda *a, relu: dense_lib.dense(*a, relu=relu, interpret=True)):
    g = jax.grad(lambda b: f(x2, w2, b, relu=True).sum())(np.zeros(4, np.float32))
    assert np.all(np.asarray(g) == 0)


@pytest.mark.parametrize("n,h,w_,cin,cout,k", [(3, 9, 11, 5, 7, 3), (2, 7, 6, 1, 16, 3),
                                               (1, 6, 5, 3, 2, 2)])
def test_xla_cpu_convolution_gradients_equal_lax_rules(n, h, w_, cin, cout, k):
  """On the CPU the xla impl's convolution takes its gradients as forward convolutions
  (ops._conv_cpu; jax-ml/jax#12868): in float64 they equal lax's own transpose rules, and in
  float32 they are within float32's bound of them, non-square images and kernels included."""
  rng = np.random.default_rng()
  x = rng.standard_normal((n, h, w_, cin))
  kernel = rng.standard_normal((k, k + 1, cin, cout)) / np.sqrt(k * k * cin)
  dy = rng.standard_normal((n, h - k + 1, w_ - k, cout))
  hi = jax.lax.Precision.HIGHEST
  with jax.enable_x64(True):
    args = [jnp.asarray(a) for a in (x, kernel, dy)]
    want = jax.vjp(lambda *a: ops._conv(*a, precision=hi), *args[:2])[1](args[2])
    got = jax.vjp(lambda *a: ops._conv_cpu(*a, hi), *args[:2])[1](args[2])
    for g, g_want in zip(got, want):
      assert g.dtype == jnp.float64 and g.shape == g_want.shape
      assert rel_err(g, g_want) < 1e-13
  got32 = jax.vjp(lambda *a: ops._conv_cpu(*a, hi), *[a.astype(np.float32) for a in (x, kernel)])[
      1](dy.astype(np.float32))
  for g, g_want in zip(got32, want):
    assert rel_err(g, g_want) < TOL
  # And the xla impl's conv_relu takes it here (the suite runs on the CPU backend).
  jaxpr = jax.make_jaxpr(lambda w: ops.conv_relu(x.astype(np.float32), w, 0.0))(
      kernel.astype(np.float32))
  assert "custom_vjp_call" in str(jaxpr)
