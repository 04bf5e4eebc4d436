"""pallas_kernels.fused.sgd_parts, the CNN step's update kernel, against a float64 reference
(interpret mode on the CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels import common
from pallas_kernels.fused import sgd_parts

@pytest.mark.parametrize("optimizer", ["momentum", "sgd", "adam"])
def test_sgd_parts_matches_reference_float64(optimizer):
  """Odd shapes and paddings, one to 300 partials (several tiles of them), every parameter of
  the launch updated in place (with Adam its moments too, by the corrections at the step's
  place), the metrics stored at their step and nowhere else."""
  momentum = optimizer == "momentum"
  rng = np.random.default_rng()
  specs = [((9, 5, 7), (9, 8, 8), 13), ((9, 1, 6), (16, 1, 8), 300), ((11, 10), (11, 16), 3),
           ((10,), (16,), 2), ((3,), None, 1), ((40, 33), None, 5)]
  with jax.enable_x64(True):
    layouts = [sgd_parts.layout(d, p) for d, p, _ in specs]
    parts = [jnp.asarray(rng.normal(size=(n, lay.size))) for (_, _, n), lay in zip(specs, layouts)]
    params = [jnp.asarray(rng.normal(size=d)) for d, _, _ in specs]
    vels = [jnp.asarray(rng.normal(size=d)) for d, _, _ in specs] if momentum else None
    moments, corrections, factors = None, None, None
    if optimizer == "adam":  # nu >= 0; the step at 2 of 4: t = count + 3
      moments = ([jnp.asarray(rng.normal(size=d)) for d, _, _ in specs],
                 [jnp.asarray(rng.random(size=d)) for d, _, _ in specs])
      corrections = common.adam_corrections(5, 4, jnp.float64)
      factors = (corrections[4], corrections[5])
      assert np.isclose(factors[0], 1 - 0.9 ** 8) and np.isclose(factors[1], 1 - 0.999 ** 8)
    row_loss, row_correct = jnp.asarray(rng.random(7)), jnp.asarray(rng.integers(0, 2, 7))
    ref_p, ref_v = sgd_parts.reference(parts, params, vels, 0.1, 0.9, layouts, moments, factors)
    got_p, got_v, losses, correct = sgd_parts.sgd_parts(
        parts, params, vels, layouts, 0.1, 0.9, row_loss, row_correct, 2, jnp.full(4, -1.0),
        jnp.full(4, -1, jnp.int32), moments=moments, corrections=corrections, interpret=True)
  if optimizer == "adam":
    got_v, ref_v = [*got_v[0], *got_v[1]], [*ref_v[0], *ref_v[1]]
  for a, b in zip(got_p + (got_v or []), ref_p + (ref_v or [])):
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(losses, [-1, -1, np.mean(np.asarray(row_loss)), -1], rtol=1e-12)
  np.testing.assert_array_equal(correct, [-1, -1, int(np.sum(row_correct)), -1])
