"""tile_regression_mgpu on the CPU: its kernel lowers for a Hopper GPU (Mosaic GPU's checks of
layouts, shared memory and copies run at lowering), its jnp twin follows the float64 training of
the project, and networks it cannot take are refused in one line. Its numbers on the GPU are
checked by ``experiments.check_kernels --only=tile_regression`` on the device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, synthetic
from pallas_kernels.fused import tile_regression_mgpu
from kernel_checks import float64_steps

WIDTHS = (32, 256, 1024, 256, 1)


@pytest.mark.skipif(
    tuple(int(v) for v in jax.__version__.split(".")[:2]) not in tile_regression_mgpu.CHECKED,
    reason="checked on a GPU with jax 0.11 and 0.12 only: the kernel is not taken elsewhere")
@pytest.mark.parametrize("steps", [1, 3])
def test_kernel_lowers(steps):
  f32 = jnp.float32
  shapes = [((32, 256), f32), ((256, 1024), f32), ((1024, 256), f32), ((256,), f32),
            ((steps, 256, 32), f32), ((steps, 256), f32)]
  fn = jax.jit(lambda *a: tile_regression_mgpu.train_steps(*a, 0.002))
  text = fn.trace(*(jax.ShapeDtypeStruct(s, d) for s, d in shapes)).lower(
      lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text and "red.release.gpu.global.add" in text  # The grid barrier
  assert "fence.proxy.async.global" in text  # Before copies read what other CTAs wrote


def _data(rng, steps):
  n = steps * 256 + 3
  x, y = synthetic.make_regression(n, rng)
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), WIDTHS, bias=False)
  return params, x, y, rng.permutation(n).astype(np.int32)


def test_twin_follows_train_step_in_float64():
  """The twin's arithmetic (z3 and dh1 summed over K quarters in order, the outputs over
  64-unit blocks, dw3 over row quarters) is the project's training step: float64 trajectories within
  1e-10."""
  rng = np.random.default_rng(0)
  params, x, y, order = _data(rng, 4)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    got, losses = tile_regression_mgpu.train_epoch(p64, jnp.float64(x), jnp.float64(y), order,
                                                   0.002, steps=4, use_kernel=False)
    want, p = float64_steps(p64, x, y, order, 0.002, 4, 256, models.REGRESSION)
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-10)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-13)


def test_twin_in_float32_is_near_float64():
  """In float32 the twin stays within float32's tolerance of the float64 run (the kernel is
  held to it, or to twice xla's distance, on the GPU)."""
  rng = np.random.default_rng(1)
  params, x, y, order = _data(rng, 5)
  got, losses = tile_regression_mgpu.train_epoch(params, x, y, order, 0.002, steps=5,
                                                 use_kernel=False)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    want, want_losses = tile_regression_mgpu.train_epoch(
        p64, jnp.float64(x), jnp.float64(y), order, 0.002, steps=5, use_kernel=False)
  np.testing.assert_allclose(np.asarray(losses), np.asarray(want_losses), rtol=1e-5)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert np.linalg.norm(np.asarray(a) - b) <= 1e-5 * np.linalg.norm(b)


@pytest.mark.parametrize("widths,batch,kw,message", [
    ((32, 256, 256, 1), 256, {}, "it trains 32-256-1024-256-1, not 32-256-256-1"),
    ((32, 256, 1024, 256, 1), 128, {}, "it takes batch 256, not 128"),
    ((32, 256, 1024, 256, 1), 256, {"bias": True}, "it has no biases"),
    ((32, 256, 1024, 256, 1), 256, {"optimizer": "adam"}, "plain SGD, not adam"),
    ((32, 256, 1024, 256, 1), 256, {"dtype": np.float64}, "float32, not float64"),
])
def test_networks_it_cannot_take_are_named(widths, batch, kw, message):
  args = {"bias": False, "optimizer": "sgd", "dtype": jnp.float32, **kw}
  why = tile_regression_mgpu.problem(widths, batch, **args)
  assert why is not None and message in why and "\n" not in why


def test_the_network_it_takes_with_the_jax_it_was_checked_with(monkeypatch):
  args = dict(bias=False, optimizer="sgd", dtype=jnp.float32)
  monkeypatch.setattr(jax, "__version__", "0.11.2")
  assert tile_regression_mgpu.problem(WIDTHS, 256, **args) is None
  monkeypatch.setattr(jax, "__version__", "0.10.2")
  assert "not checked on a GPU with jax 0.10" in tile_regression_mgpu.problem(WIDTHS, 256, **args)
