"""The regression nets' phase kernels on the CPU (grid_regression_mgpu: 32-256-256-1;
tile_regression_mgpu: 32-256-1024-256-1): each kernel lowers for a Hopper GPU (Mosaic GPU's
checks of layouts, shared memory and copies run at lowering), its jnp twin follows the float64
training of the project, and networks it cannot take are refused in one line. Their numbers on
the GPU are checked by ``experiments.check_kernels --only=grid_regression,tile_regression`` on
the device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, synthetic
from pallas_kernels import common
from pallas_kernels.fused import grid_regression_mgpu, tile_regression_mgpu
from kernel_checks import float64_steps

KERNELS = {"grid_regression": (grid_regression_mgpu, (32, 256, 256, 1)),
           "tile_regression": (tile_regression_mgpu, (32, 256, 1024, 256, 1))}
both = pytest.mark.parametrize("name", list(KERNELS))


# The oldest jax whose Mosaic GPU lowers each kernel: jax 0.10's lowers no concatenate in Lane
# semantics, which grid_regression_mgpu's operands take.
LOWERS_FROM = {"grid_regression": (0, 11), "tile_regression": (0, 10)}


@both
@pytest.mark.parametrize("steps", [1, 3])
def test_kernel_lowers(name, steps):
  kernel, widths = KERNELS[name]
  if common.jax_version() < LOWERS_FROM[name]:
    pytest.skip("jax 0.10's Mosaic GPU lowers no concatenate in Lane semantics: not taken")
  f32 = jnp.float32
  shapes = ([(a, b) for a, b in zip(widths[:-2], widths[1:-1])] + [(widths[-2],)]
            + [(steps, 256, 32), (steps, 256)])
  fn = jax.jit(lambda *a: kernel.train_steps(*a, 0.002))
  text = fn.trace(*(jax.ShapeDtypeStruct(s, f32) for s in shapes)).lower(
      lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text and "red.release.gpu.global.add" in text  # The grid barrier
  assert "fence.proxy.async.global" in text  # Before copies read what other CTAs wrote


@pytest.mark.parametrize("name, option", [("grid_regression", "quarter_barriers"),
                                          ("grid_regression", "fresh_descriptors"),
                                          ("tile_regression", "fresh_descriptors")])
def test_options_lower(name, option):
  """The kernels' options (``QUARTER_BARRIERS``: barriers 1 and 2 by row quarter;
  ``FRESH_DESCRIPTORS``: each product's operand descriptors computed where it runs; both on by
  default since the H100 run of 2026-12-07) lower for Hopper both on and off, and differ."""
  kernel, widths = KERNELS[name]
  if common.jax_version() < LOWERS_FROM[name]:
    pytest.skip("jax 0.10's Mosaic GPU lowers no concatenate in Lane semantics: not taken")
  f32 = jnp.float32
  shapes = ([(a, b) for a, b in zip(widths[:-2], widths[1:-1])] + [(widths[-2],)]
            + [(2, 256, 32), (2, 256)])
  texts = [jax.jit(lambda *a, on=on: kernel.train_steps(*a, 0.002, **{option: on}))
           .trace(*(jax.ShapeDtypeStruct(s, f32) for s in shapes))
           .lower(lowering_platforms=("cuda",)).as_text() for on in (False, True)]
  assert all("mosaic_gpu" in t for t in texts) and texts[0] != texts[1]


def _data(rng, steps, widths):
  n = steps * 256 + 3
  x, y = synthetic.make_regression(n, rng)
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths, bias=False)
  return params, x, y, rng.permutation(n).astype(np.int32)


@both
def test_twin_follows_train_step_in_float64(name):
  """The twin's arithmetic (its sums over slices, K quarters and row quarters in the kernel's
  orders) is the project's training step: float64 trajectories within 1e-10."""
  kernel, widths = KERNELS[name]
  rng = np.random.default_rng(0)
  params, x, y, order = _data(rng, 4, widths)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    got, losses = kernel.train_epoch(p64, jnp.float64(x), jnp.float64(y), order, 0.002,
                                     steps=4, use_kernel=False)
    want, p = float64_steps(p64, x, y, order, 0.002, 4, 256, models.REGRESSION)
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-10)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-13)


@both
def test_twin_in_float32_is_near_float64(name):
  """In float32 the twin stays within float32's tolerance of the float64 run (the kernel is
  held to it, or to twice xla's distance, on the GPU)."""
  kernel, widths = KERNELS[name]
  rng = np.random.default_rng(1)
  params, x, y, order = _data(rng, 5, widths)
  got, losses = kernel.train_epoch(params, x, y, order, 0.002, steps=5, use_kernel=False)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    want, want_losses = kernel.train_epoch(p64, jnp.float64(x), jnp.float64(y), order, 0.002,
                                           steps=5, use_kernel=False)
  np.testing.assert_allclose(np.asarray(losses), np.asarray(want_losses), rtol=1e-5)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert np.linalg.norm(np.asarray(a) - b) <= 1e-5 * np.linalg.norm(b)


@both
@pytest.mark.parametrize("change,message", [
    ({"widths": (32, 256, 1)}, "it trains {net}, not 32-256-1"),
    ({"batch": 128}, "it takes batch 256, not 128"),
    ({"bias": True}, "it has no biases"),
    ({"optimizer": "adam"}, "plain SGD, not adam"),
    ({"dtype": np.float64}, "float32, not float64"),
])
def test_networks_it_cannot_take_are_named(name, change, message):
  kernel, widths = KERNELS[name]
  args = {"widths": widths, "batch": 256, "bias": False, "optimizer": "sgd",
          "dtype": jnp.float32, **change}
  why = kernel.problem(args.pop("widths"), args.pop("batch"), **args)
  want = message.format(net="-".join(map(str, widths)))
  assert why is not None and want in why and "\n" not in why


@both
@pytest.mark.parametrize("version", ["0.10.2", "0.11.2", "0.12.0"])
def test_the_network_it_takes_with_the_jax_it_was_checked_with(name, version, monkeypatch):
  """Taken only with a jax it was checked with on a GPU (``CHECKED``), refused in one line
  with any other."""
  kernel, widths = KERNELS[name]
  args = dict(bias=False, optimizer="sgd", dtype=jnp.float32)
  monkeypatch.setattr(jax, "__version__", version)
  why = kernel.problem(widths, 256, **args)
  if tuple(int(v) for v in version.split(".")[:2]) in kernel.CHECKED:
    assert why is None
  else:
    assert f"not checked on a GPU with jax {version.rsplit('.', 1)[0]}" in why
