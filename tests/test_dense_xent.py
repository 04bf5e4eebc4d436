"""pallas_kernels.ops.dense_xent, the fused output layer, against a float64 reference (interpret
mode on CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_checks import TOL, reference_vjp, rel_err
from pallas_kernels.ops import dense_xent

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
