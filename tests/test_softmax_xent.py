"""pallas_kernels.ops.softmax_xent against a float64 reference (interpret mode on CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_checks import TOL, reference_vjp
from pallas_kernels.ops import softmax_xent

CLASSES = [(1, 10), (37, 10), (64, 3), (1000, 10), (37, 100), (64, 1000)]


def error_scales(z, labels, g):
  """What float32 rounding errors of the loss and of dz are relative to.

  The loss is logsumexp(z) - z[label], each term rounded relative to its own size, so a row whose
  label dominates (loss 5e-5 from terms near 10: seen in CI) loses the loss's relative digits
  honestly; dz's entries carry the error of exp(z - logsumexp), relative to |z| + |logsumexp|."""
  z = np.asarray(z, np.float64)
  rows = np.arange(len(z))
  lse = np.log(np.sum(np.exp(z - z.max(1, keepdims=True)), 1)) + z.max(1)
  loss_scale = np.mean(np.abs(lse) + np.abs(z[rows, labels]))
  p = np.exp(z - lse[:, None])
  onehot = np.eye(z.shape[1])[labels]
  dz_scale = g / len(z) * np.linalg.norm(p * (1 + np.abs(z) + np.abs(lse)[:, None]) + onehot)
  return loss_scale, dz_scale


@pytest.mark.parametrize("block_m", [16, 64, 128])
@pytest.mark.parametrize("m,c", CLASSES)
def test_softmax_xent_forward_and_grad(m, c, block_m):
  seed = np.random.SeedSequence().entropy  # Fresh inputs each run; the seed says which.
  rng = np.random.default_rng(seed)
  z = (3 * rng.standard_normal((m, c))).astype(np.float32)
  labels = rng.integers(0, c, m).astype(np.int32)
  blocks = (("block_m", block_m),)
  (loss, correct), vjp = jax.vjp(
      lambda z: softmax_xent.softmax_cross_entropy(z, labels, blocks=blocks, interpret=True), z)
  g = np.float32(rng.uniform(0.5, 2.0))
  dz, = vjp((jnp.asarray(g), np.zeros((), jax.dtypes.float0)))
  ref = lambda z: softmax_xent.reference(z, jnp.asarray(labels))[0]
  loss64, (dz64,) = reference_vjp(ref, [z], g)
  loss_scale, dz_scale = error_scales(z, labels, g)
  assert abs(float(loss) - float(loss64)) < TOL * loss_scale, f"seed {seed}"
  assert np.linalg.norm(np.asarray(dz, np.float64) - dz64) < TOL * dz_scale, f"seed {seed}"
  assert int(correct) == int(np.sum(np.argmax(z, axis=1) == labels)), f"seed {seed}"


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
