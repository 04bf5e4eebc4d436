"""Pallas kernels against float64 references on fresh random inputs (interpret mode on CPU).

Shapes cover M in {1, 37, 64, 1000}, K in {784, 100, 33}, N in {10, 256, 1000}: multiples of the
blocks and not. Unwritten outputs would show up as NaN (interpret mode fills outputs with NaN).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import paths
from pallas_kernels.ops import dense as dense_lib
from pallas_kernels.ops import softmax_xent

TOL = 1e-5  # float32 against float64, relative Frobenius norm.
SHAPES = [(1, 784, 256), (37, 100, 10), (64, 784, 256), (64, 33, 1000), (1000, 100, 10),
          (37, 33, 256), (1000, 784, 10), (1, 33, 10)]
BLOCKS = [None, (("block_m", 16), ("block_n", 16), ("block_k", 16)),
          (("block_m", 32), ("block_n", 128), ("block_k", 64))]


def rel_err(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  assert np.all(np.isfinite(a)), "non-finite (unwritten?) output"
  return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def clear_of_relu_kink(dy, z64, margin=1e-4):
  """``dy`` with zeros where the float64 pre-activation ``z64`` lies within ``margin`` of 0.

  There the float32 kernel and the float64 reference may rightly fall on different sides of the
  ReLU (a pre-activation of 1e-7 rounds either way), and one such element moves a whole row of
  dx: the fresh random inputs of these tests hit one now and then (dx errors of 3e-3 and 2e-2
  seen in CI). Both sides get the same cleared cotangent, so the test still checks every output
  of the kernels, each against the gradient it should have."""
  return np.where(np.abs(z64) < margin, 0.0, dy).astype(np.float32)


def reference_vjp(fn, args, cotangent):
  """Value and input gradients of ``fn`` in float64."""
  with jax.enable_x64(True):
    args64 = [None if a is None else jnp.asarray(a, jnp.float64) for a in args]
    y, vjp = jax.vjp(fn, *args64)
    return np.asarray(y), [None if g is None else np.asarray(g)
                           for g in vjp(jnp.asarray(cotangent, jnp.float64))]


@pytest.mark.parametrize("blocks", BLOCKS, ids=["default", "16x16x16", "32x128x64"])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("relu,bias", [(True, True), (False, True), (True, False)])
def test_dense_forward_and_grads(m, k, n, blocks, relu, bias):
  rng = np.random.default_rng()
  while True:  # Fresh inputs whose pre-activations have both signs, so the ReLU clips some.
    x = rng.standard_normal((m, k), np.float32)
    w = rng.standard_normal((k, n), np.float32) / np.sqrt(k)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    z64 = x.astype(np.float64) @ w + (0 if b is None else b)
    if not relu or (z64.min() < -1e-4 and z64.max() > 1e-4):
      break  # One row of 10 units (m = 1) has a single sign about once in 500 draws.
  dy = rng.standard_normal((m, n), np.float32)
  if relu:
    dy = clear_of_relu_kink(dy, z64)

  fn = lambda x, w, b: dense_lib.dense(x, w, b, relu=relu, blocks=blocks, interpret=True)
  y, vjp = jax.vjp(fn, x, w, b)
  dx, dw, db = vjp(jnp.asarray(dy))
  ref = lambda x, w, b: dense_lib.reference(x, w, b, relu=relu)
  y64, (dx64, dw64, db64) = reference_vjp(ref, [x, w, b], dy)

  assert rel_err(y, y64) < TOL
  assert rel_err(dx, dx64) < TOL
  assert rel_err(dw, dw64) < TOL
  if bias:
    assert rel_err(db, db64) < TOL
  else:
    assert db is None
  if relu:  # The ReLU really clipped something, so the mask was exercised.
    assert 0 < np.mean(np.asarray(y) == 0) < 1


@pytest.mark.parametrize("blocks", BLOCKS[:2], ids=["default", "16x16x16"])
@pytest.mark.parametrize("m,k,n", [(1, 784, 256), (37, 100, 10), (64, 784, 256), (37, 33, 1000),
                                   (300, 33, 40)])
def test_dense_pretransposed_w(m, k, n, blocks):
  """W stored as (N, K): the same values and gradients as the (K, N) layout's reference, dw in
  the stored layout."""
  rng = np.random.default_rng()
  x = rng.standard_normal((m, k), np.float32)
  w_t = rng.standard_normal((n, k), np.float32) / np.sqrt(k)
  b = rng.standard_normal(n).astype(np.float32)
  dy = clear_of_relu_kink(rng.standard_normal((m, n), np.float32),
                          x.astype(np.float64) @ w_t.T + b)

  fn = lambda x, w_t, b: dense_lib.dense(x, w_t, b, relu=True, blocks=blocks, interpret=True,
                                             w_transposed=True)
  y, vjp = jax.vjp(fn, x, w_t, b)
  dx, dw_t, db = vjp(jnp.asarray(dy))
  ref = lambda x, w_t, b: dense_lib.reference(x, w_t.T, b, relu=True)
  y64, (dx64, dw_t64, db64) = reference_vjp(ref, [x, w_t, b], dy)

  assert dw_t.shape == (n, k)
  for got, want in [(y, y64), (dx, dx64), (dw_t, dw_t64), (db, db64)]:
    assert rel_err(got, want) < TOL


@pytest.mark.parametrize("w_transposed", [False, True])
@pytest.mark.parametrize("m,k,n,splits", [(70, 37, 19, 3), (70, 37, 19, 8), (5, 40, 33, 4),
                                          (64, 20, 16, 1)])
def test_dense_dw_splits(m, k, n, splits, w_transposed):
  """dw and db as partial sums over runs of rows: rows that do not fill the last block, more
  splits than blocks of rows, tiles reaching past K and N (which must not spill into the next
  split's partials)."""
  rng = np.random.default_rng()
  x, dy, y = (rng.standard_normal(s, np.float32) for s in ((m, k), (m, n), (m, n)))
  g = dy.astype(np.float64) * (y > 0)
  want = x.T.astype(np.float64) @ g
  dw, db = dense_lib.dense_dw(x, dy, y, relu=True, w_transposed=w_transposed, block_m=16,
                              block_n=16, block_k=16, dw_splits=splits, interpret=True)
  assert rel_err(dw, want.T if w_transposed else want) < TOL
  assert rel_err(db, g.sum(0)) < TOL
  if not w_transposed:  # x handed over as (K, M): the same sums.
    dw, db = dense_lib.dense_dw(np.ascontiguousarray(x.T), dy, y, relu=True, x_transposed=True,
                                block_m=16, block_n=16, block_k=16, dw_splits=splits,
                                interpret=True)
    assert rel_err(dw, want) < TOL and rel_err(db, g.sum(0)) < TOL


def test_dense_blocks_by_shape():
  """Large batches take their own tiles per kernel, dw in splits (from x transposed where that
  paid); overrides set every kernel's tiles, unsplit."""
  small = dense_lib.kernel_blocks(64, 784, "float32", "dw", None)
  assert (small["block_m"], small["block_n"], small["block_k"]) == (16, 16, 128)
  assert "dw_splits" not in small and small["precision"] == "float32"
  large = dense_lib.kernel_blocks(8192, 784, "float32", "dw", None)
  assert large["x_transposed"] and large["dw_splits"] > 1
  assert "x_transposed" not in dense_lib.kernel_blocks(8192, 784, "float32", "dw", None, True)
  assert dense_lib.kernel_blocks(8192, 32, "tf32", "fwd", None)["block_k"] == 32
  tiles = (("block_m", 32), ("block_n", 32), ("block_k", 64))
  forced = dense_lib.kernel_blocks(8192, 784, "float32", "dw", tiles)
  assert forced == dict(block_m=32, block_n=32, block_k=64, num_warps=4, num_stages=2,
                        precision="float32")


def test_dense_large_batch_path(monkeypatch):
  """The large-batch kernels (dw in splits, from x transposed) through the custom_vjp, on a
  shape small enough for interpret mode: the threshold is lowered for the test."""
  monkeypatch.setattr(dense_lib, "_LARGE_ROWS", 64)
  rng = np.random.default_rng()
  x = rng.standard_normal((300, 70), np.float32)
  w = rng.standard_normal((70, 40), np.float32) / np.sqrt(70)
  b = rng.standard_normal(40).astype(np.float32)
  dy = clear_of_relu_kink(rng.standard_normal((300, 40), np.float32),
                          x.astype(np.float64) @ w + b)
  fn = lambda x, w, b: dense_lib.dense(x, w, b, relu=True, interpret=True)
  y, vjp = jax.vjp(fn, x, w, b)
  ref = lambda x, w, b: dense_lib.reference(x, w, b, relu=True)
  y64, want = reference_vjp(ref, [x, w, b], dy)
  assert rel_err(y, y64) < TOL
  for got, w64 in zip(vjp(jnp.asarray(dy)), want):
    assert rel_err(got, w64) < TOL


@pytest.mark.parametrize("precision", ["tf32", "float32"])
@pytest.mark.parametrize("relu,bias", [(True, True), (False, False)])
def test_dense_hopper_path(monkeypatch, relu, bias, precision):
  """The tf32 large-batch path of Hopper GPUs (dense_mgpu: W and g transposed for the
  kernel, dW's partial sums over uneven runs of the batch, db in runs) through the custom_vjp,
  with the kernel's jnp twin in its place (the CPU has no Mosaic GPU interpreter for it): odd
  shapes, the threshold lowered for the test."""
  monkeypatch.setattr(paths, "HOPPER_DENSE_FROM_ROWS", 64)
  m, k, n = 296, 104, 264  # multiples of 8 (TMA), of no tile
  assert paths.dense_on_hopper(m, k, n, precision, None, False, True)
  rng = np.random.default_rng()
  x = rng.standard_normal((m, k), np.float32)
  w = rng.standard_normal((k, n), np.float32) / np.sqrt(k)
  b = rng.standard_normal(n).astype(np.float32) if bias else None
  dy = rng.standard_normal((m, n), np.float32)
  if relu:
    dy = clear_of_relu_kink(dy, x.astype(np.float64) @ w + (0 if b is None else b))
  fn = lambda x, w, b: dense_lib.dense(x, w, b, relu=relu, precision=precision, interpret=True,
                                       hopper=True)
  y, vjp = jax.vjp(fn, x, w, b)
  ref = lambda x, w, b: dense_lib.reference(x, w, b, relu=relu)
  y64, want = reference_vjp(ref, [x, w, b], dy)
  assert rel_err(y, y64) < TOL
  for got, w64 in zip(vjp(jnp.asarray(dy)), want):
    if w64 is None:
      assert got is None
    else:
      assert rel_err(got, w64) < TOL


@pytest.mark.parametrize("precision,tol", [("tf32", 5e-3), ("bfloat16", 2e-2)])
def test_dense_reduced_precision(precision, tol):
  """Tolerances of the reduced modes (on CPU they compute more exactly than on a GPU)."""
  rng = np.random.default_rng()
  x, w = rng.standard_normal((64, 784), np.float32), rng.standard_normal((784, 256), np.float32)
  y = dense_lib.dense(x, w, None, precision=precision, interpret=True)
  assert rel_err(y, x.astype(np.float64) @ w) < tol


CLASSES = [(1, 10), (37, 10), (64, 3), (1000, 10), (37, 100), (64, 1000)]


@pytest.mark.parametrize("block_m", [16, 64, 128])
@pytest.mark.parametrize("m,c", CLASSES)
def test_softmax_xent_forward_and_grad(m, c, block_m):
  rng = np.random.default_rng()
  z = (3 * rng.standard_normal((m, c))).astype(np.float32)
  labels = rng.integers(0, c, m).astype(np.int32)
  blocks = (("block_m", block_m),)
  (loss, correct), vjp = jax.vjp(
      lambda z: softmax_xent.softmax_cross_entropy(z, labels, blocks=blocks, interpret=True), z)
  g = np.float32(rng.uniform(0.5, 2.0))
  dz, = vjp((jnp.asarray(g), np.zeros((), jax.dtypes.float0)))
  ref = lambda z: softmax_xent.reference(z, jnp.asarray(labels))[0]
  loss64, (dz64,) = reference_vjp(ref, [z], g)
  assert rel_err(loss, loss64) < TOL
  assert rel_err(dz, dz64) < TOL
  assert int(correct) == int(np.sum(np.argmax(z, axis=1) == labels))


def test_softmax_xent_huge_logits():
  z = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4], [3.0, 1.0, 2.0], [1e4, 1e4, -1e4]],
               np.float32)
  labels = np.array([0, 1, 2, 1], np.int32)
  expected = np.mean([0.0, 2e4, np.log(1 + np.exp(-2) + np.exp(-1)) + 1.0, np.log(2)])
  loss, correct = softmax_xent.softmax_cross_entropy(z, labels, interpret=True)
  assert np.isfinite(float(loss)) and abs(float(loss) / expected - 1) < 1e-6
  assert int(correct) == 1  # Row 3 ties: the first maximum (class 0) wins, as jnp.argmax.
  dz = jax.grad(lambda z: softmax_xent.softmax_cross_entropy(z, labels, interpret=True)[0])(z)
  assert np.all(np.isfinite(dz))
  np.testing.assert_allclose(dz[1], np.array([0, -1, 1]) / 4, atol=1e-7)


# Convolution, max-pool and MSE -----------------------------------------------------------------

from jaxshallow import ops  # noqa: E402
from pallas_kernels.ops import conv, conv_pool, conv_stack, max_pool, mse  # noqa: E402

SMALL_BLOCKS = (("block_p", 32), ("splits", 4), ("dw_taps", 2))  # dw: runs of 2, 2, 2, 2, 1 taps.
WIDE = (("wide", True),)
DIRECT = (("winograd", False),)  # conv_relu_pool's forward as nine taps' products a position.
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
  with jax.enable_x64(True):
    z64 = jax.lax.conv_general_dilated(x.astype(np.float64), w.astype(np.float64), (1, 1),
                                       "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
  dy = clear_of_relu_kink(dy, np.asarray(z64))
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
    for g, g_want in zip(grads, want):
      np.testing.assert_allclose(g, np.reshape(g_want, g.shape), rtol=1e-5, atol=1e-6)
  w2 = rng.standard_normal((2, 4)).astype(np.float32)
  x2 = np.zeros((3, 2), np.float32)  # Every pre-activation exactly 0.
  for f in (ops.dense, lambda *a, relu: dense_lib.dense(*a, relu=relu, interpret=True)):
    g = jax.grad(lambda b: f(x2, w2, b, relu=True).sum())(np.zeros(4, np.float32))
    assert np.all(np.asarray(g) == 0)


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
  y, vjp = jax.vjp(lambda *a: conv_pool.conv_relu_pool(*a, blocks=blocks, interpret=True), x, w, b)
  y64, grads64 = reference_vjp(conv_pool.reference, [x, w, b], dy)
  assert rel_err(y, y64) < TOL
  for g, g64 in zip(vjp(jnp.asarray(dy)), grads64):
    assert rel_err(g, g64) < TOL


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
  y, vjp = jax.vjp(lambda *a: conv_stack.conv_stack(*a, blocks=blocks, interpret=True),
                   x, w1, b1, w2, b2)
  grads = vjp(jnp.asarray(dy))
  mask = np.asarray(conv.conv_relu(x, w1, b1, blocks=blocks, interpret=True)) > 0  # The op's own.

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
  """The same values and weight gradients as conv_relu then conv_relu_pool (xla and Pallas)."""
  rng = np.random.default_rng()
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


@pytest.mark.parametrize("n", [1, 256, 2000])
def test_mse_and_grad(n):
  rng = np.random.default_rng()
  p, t = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
  g = np.float32(rng.uniform(0.5, 2))
  loss, vjp = jax.vjp(lambda p: mse.mse(p, t, interpret=True), p)
  loss64, (dp64,) = reference_vjp(lambda p: ops.mse(p, jnp.asarray(t, jnp.float64)), [p], g)
  assert rel_err(loss, loss64) < TOL
  assert rel_err(vjp(g)[0], dp64) < TOL


# The fused output layer -------------------------------------------------------------------------

from pallas_kernels.ops import dense_xent  # noqa: E402


@pytest.mark.parametrize("blocks", [None, (("block_m", 16), ("block_k", 16)),
                                    (("block_m", 16), ("block_k", 16), ("split", 32))],
                         ids=["default", "16x16", "split32"])
@pytest.mark.parametrize("m,k,n", [(64, 256, 10), (1, 784, 10), (37, 100, 3), (1000, 33, 10),
                                   (130, 4608, 10), (64, 256, 100)])
def test_dense_xent_forward_and_grads(m, k, n, blocks):
  rng = np.random.default_rng()
  h = np.maximum(rng.standard_normal((m, k)), 0).astype(np.float32)
  w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
  b = (0.1 * rng.standard_normal(n)).astype(np.float32)
  labels = rng.integers(0, n, m).astype(np.int32)
  g = np.float32(rng.uniform(0.5, 2))
  fn = lambda h, w, b: dense_xent.dense_softmax_cross_entropy(h, w, b, labels, blocks=blocks,
                                                              interpret=True)
  (loss, correct), vjp = jax.vjp(fn, h, w, b)
  grads = vjp((jnp.asarray(g), np.zeros((), jax.dtypes.float0)))
  ref = lambda h, w, b: dense_xent.reference(h, w, b, jnp.asarray(labels))[0]
  loss64, grads64 = reference_vjp(ref, [h, w, b], g)
  assert rel_err(loss, loss64) < TOL
  for got, want in zip(grads[:2], grads64[:2]):
    assert rel_err(got, want) < TOL
  logits = h.astype(np.float64) @ w + b
  # db adds m rows of g * (softmax - onehot) / m, which cancel (each row sums to 0), so its
  # float32 error is relative to the rows' magnitudes, not to the small sum (a fresh draw of
  # 37 x 3 once gave 1.04e-5 against the sum).
  p = np.exp(logits - logits.max(1, keepdims=True))
  rows = g * (p / p.sum(1, keepdims=True) - np.eye(n)[labels]) / m
  scale = np.linalg.norm(np.abs(rows).sum(0))
  assert np.linalg.norm(np.asarray(grads[2], np.float64) - grads64[2]) / scale < TOL
  top2 = np.sort(logits, axis=1)[:, -2:] if n > 1 else None
  near_ties = 0 if top2 is None else int(np.sum(top2[:, 1] - top2[:, 0] < 1e-5))
  # A row whose two best logits are within float32 rounding may rightly go either way.
  assert abs(int(correct) - int(np.sum(logits.argmax(1) == labels))) <= near_ties
  # Without differentiation (evaluation) the same loss comes from the forward-only kernel.
  assert rel_err(fn(h, w, b)[0], loss64) < TOL


@pytest.mark.parametrize("n", [1, 20, 33, 704])
def test_sum_many_parts_adds_every_part(n):
  """Runs of 16, then their sums: every part counted once, the padding none."""
  from pallas_kernels import common
  parts = np.random.default_rng(n).standard_normal((n, 3, 5)).astype(np.float32)
  got = jax.jit(common.sum_many_parts)(parts)
  np.testing.assert_allclose(got, parts.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
