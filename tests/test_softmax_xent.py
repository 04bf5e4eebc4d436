"""pallas_kernels.ops.softmax_xent against a float64 reference (interpret mode on CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_checks import TOL, reference_vjp, rel_err
from pallas_kernels.ops import softmax_xent

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
