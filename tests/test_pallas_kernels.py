"""Pallas kernels against float64 references on fresh random inputs (interpret mode on CPU).

Shapes cover M in {1, 37, 64, 1000}, K in {784, 100, 33}, N in {10, 256, 1000}: multiples of the
blocks and not. Unwritten outputs would show up as NaN (interpret mode fills outputs with NaN).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels import dense as dense_lib
from pallas_kernels import softmax_xent

TOL = 1e-5  # float32 against float64, relative Frobenius norm.
SHAPES = [(1, 784, 256), (37, 100, 10), (64, 784, 256), (64, 33, 1000), (1000, 100, 10),
          (37, 33, 256), (1000, 784, 10), (1, 33, 10)]
BLOCKS = [None, (("block_m", 16), ("block_n", 16), ("block_k", 16)),
          (("block_m", 32), ("block_n", 128), ("block_k", 64))]


def rel_err(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  assert np.all(np.isfinite(a)), "non-finite (unwritten?) output"
  return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


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
  x = rng.standard_normal((m, k), np.float32)
  w = rng.standard_normal((k, n), np.float32) / np.sqrt(k)
  b = rng.standard_normal(n).astype(np.float32) if bias else None
  dy = rng.standard_normal((m, n), np.float32)

  fn = lambda x, w, b: dense_lib.dense(x, w, b, relu, "float32", blocks, True)
  y, vjp = jax.vjp(fn, x, w, b)
  dx, dw, db = vjp(jnp.asarray(dy))
  ref = lambda x, w, b: dense_lib.dense_reference(x, w, b, relu=relu)
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


@pytest.mark.parametrize("precision,tol", [("tf32", 5e-3), ("bfloat16", 2e-2)])
def test_dense_reduced_precision(precision, tol):
  """Tolerances of the reduced modes (on CPU they compute more exactly than on a GPU)."""
  rng = np.random.default_rng()
  x, w = rng.standard_normal((64, 784), np.float32), rng.standard_normal((784, 256), np.float32)
  y = dense_lib.dense(x, w, None, False, precision, None, True)
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
      lambda z: softmax_xent.softmax_cross_entropy(z, labels, blocks, True), z)
  g = np.float32(rng.uniform(0.5, 2.0))
  dz, = vjp((jnp.asarray(g), np.zeros((), jax.dtypes.float0)))
  ref = lambda z: softmax_xent.softmax_cross_entropy_reference(z, jnp.asarray(labels))[0]
  loss64, (dz64,) = reference_vjp(ref, [z], g)
  assert rel_err(loss, loss64) < TOL
  assert rel_err(dz, dz64) < TOL
  assert int(correct) == int(np.sum(np.argmax(z, axis=1) == labels))


def test_softmax_xent_huge_logits():
  z = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4], [3.0, 1.0, 2.0], [1e4, 1e4, -1e4]],
               np.float32)
  labels = np.array([0, 1, 2, 1], np.int32)
  expected = np.mean([0.0, 2e4, np.log(1 + np.exp(-2) + np.exp(-1)) + 1.0, np.log(2)])
  loss, correct = softmax_xent.softmax_cross_entropy(z, labels, None, True)
  assert np.isfinite(float(loss)) and abs(float(loss) / expected - 1) < 1e-6
  assert int(correct) == 1  # Row 3 ties: the first maximum (class 0) wins, as jnp.argmax.
  dz = jax.grad(lambda z: softmax_xent.softmax_cross_entropy(z, labels, None, True)[0])(z)
  assert np.all(np.isfinite(dz))
  np.testing.assert_allclose(dz[1], np.array([0, -1, 1]) / 4, atol=1e-7)
