"""pallas_kernels.fused.sgd_parts, the CNN step's update kernel, against a float64 reference
(interpret mode on the CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.fused import sgd_parts

@pytest.mark.parametrize("momentum", [True, False])
def test_sgd_parts_matches_reference_float64(momentum):
  """Odd shapes and paddings, one to 300 partials (several tiles of them), every parameter of
  the launch updated in place, the metrics stored at their step and nowhere else."""
  rng = np.random.default_rng()
  specs = [((9, 5, 7), (9, 8, 8), 13), ((9, 1, 6), (16, 1, 8), 300), ((11, 10), (11, 16), 3),
           ((10,), (16,), 2), ((3,), None, 1), ((40, 33), None, 5)]
  with jax.enable_x64(True):
    layouts = [sgd_parts.layout(d, p) for d, p, _ in specs]
    parts = [jnp.asarray(rng.normal(size=(n, lay.size))) for (_, _, n), lay in zip(specs, layouts)]
    params = [jnp.asarray(rng.normal(size=d)) for d, _, _ in specs]
    vels = [jnp.asarray(rng.normal(size=d)) for d, _, _ in specs] if momentum else None
    row_loss, row_correct = jnp.asarray(rng.random(7)), jnp.asarray(rng.integers(0, 2, 7))
    ref_p, ref_v = sgd_parts.reference(parts, params, vels, 0.1, 0.9, layouts)
    got_p, got_v, losses, correct = sgd_parts.sgd_parts(
        parts, params, vels, layouts, 0.1, 0.9, row_loss, row_correct, 2, jnp.full(4, -1.0),
        jnp.full(4, -1, jnp.int32), interpret=True)
  for a, b in zip(got_p + (got_v or []), ref_p + (ref_v or [])):
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(losses, [-1, -1, np.mean(np.asarray(row_loss)), -1], rtol=1e-12)
  np.testing.assert_array_equal(correct, [-1, -1, int(np.sum(row_correct)), -1])
