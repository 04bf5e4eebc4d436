"""cluster_epoch_mgpu on the CPU: its kernel lowers for a Hopper GPU (Mosaic GPU's checks of layouts,
shared memory and cluster shapes run at lowering), its jnp twin follows the float64 training
of the project, and networks it cannot take are refused in one line. Its numbers on the GPU are
checked by ``experiments.check_kernels --only=cluster`` on the device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, synthetic
from pallas_kernels.fused import cluster_epoch_mgpu
from kernel_checks import float64_steps


@pytest.mark.parametrize("hidden,steps", [(64, 1), (256, 7)])
def test_kernel_lowers(hidden, steps):
  """2 and 8 CTAs; one step, and an odd count (the last step outside the two-step loop)."""
  f32 = jnp.float32
  shapes = [((32, hidden), f32), ((hidden,), f32), ((steps, 256, 32), f32), ((steps, 256), f32)]
  fn = jax.jit(lambda w0, w1, xs, ys: cluster_epoch_mgpu.train_steps(w0, w1, xs, ys, 0.002))
  text = fn.trace(*(jax.ShapeDtypeStruct(s, d) for s, d in shapes)).lower(
      lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text


def test_kernel_of_several_clusters_lowers():
  """32-1024-1: two clusters of 16 CTAs, whose sums of the outputs meet at a grid barrier."""
  f32, steps, hidden = jnp.float32, 3, 1024
  shapes = [((32, hidden), f32), ((hidden,), f32), ((steps, 256, 32), f32), ((steps, 256), f32)]
  fn = jax.jit(lambda w0, w1, xs, ys: cluster_epoch_mgpu.train_steps(w0, w1, xs, ys, 0.002))
  text = fn.trace(*(jax.ShapeDtypeStruct(s, d) for s, d in shapes)).lower(
      lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text and "red.release.gpu.global.add" in text
  assert "fence.proxy.async.global" in text  # Before the copy reads the other clusters' sums


def _data(rng, steps, hidden):
  n = steps * 256 + 3
  x, y = synthetic.make_regression(n, rng)
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), (32, hidden, 1), bias=False)
  return params, x, y, rng.permutation(n).astype(np.int32)


@pytest.mark.parametrize("hidden", [192, 1024])
def test_twin_follows_train_step_in_float64(hidden):
  """The twin's arithmetic (outputs summed over 64-unit groups in order; a wider layer's then
  over its clusters in order) is the project's training step: float64 trajectories within
  1e-10."""
  rng = np.random.default_rng(0)
  params, x, y, order = _data(rng, 4, hidden)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    got, losses = cluster_epoch_mgpu.train_epoch(p64, jnp.float64(x), jnp.float64(y), order, 0.002,
                                            steps=4, use_kernel=False)
    want, p = float64_steps(p64, x, y, order, 0.002, 4, 256, models.REGRESSION)
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-10)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-13)


def test_twin_in_float32_is_near_float64():
  """In float32 the twin stays within float32's tolerance of the float64 run (the kernel is
  held to the same on the GPU)."""
  rng = np.random.default_rng(1)
  params, x, y, order = _data(rng, 5, 128)
  got, losses = cluster_epoch_mgpu.train_epoch(params, x, y, order, 0.002, steps=5,
                                               use_kernel=False)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    want, want_losses = cluster_epoch_mgpu.train_epoch(p64, jnp.float64(x), jnp.float64(y), order,
                                                  0.002, steps=5, use_kernel=False)
  np.testing.assert_allclose(np.asarray(losses), np.asarray(want_losses), rtol=1e-5)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    assert np.linalg.norm(np.asarray(a) - b) <= 1e-5 * np.linalg.norm(b)


@pytest.mark.parametrize("widths,batch,kw,message", [
    ((784, 256, 10), 256, {}, "it trains 32-H-1 networks, not 784-256-10"),
    ((32, 256, 256, 1), 256, {}, "not 32-256-256-1"),
    ((32, 100, 1), 256, {}, "a multiple of 64 up to 512"),
    ((32, 768, 1), 256, {}, "or of 512 up to 1024 (a cluster each), not 768"),
    ((32, 2048, 1), 256, {}, "not 2048"),
    ((32, 4096, 1), 256, {}, "not 4096"),
    ((32, 256, 1), 128, {}, "it takes batch 256, not 128"),
    ((32, 256, 1), 256, {"bias": True}, "it has no biases"),
    ((32, 256, 1), 256, {"optimizer": "momentum"}, "plain SGD, not momentum"),
    ((32, 256, 1), 256, {"dtype": np.float64}, "float32, not float64"),
])
def test_networks_it_cannot_take_are_named(widths, batch, kw, message):
  args = {"bias": False, "optimizer": "sgd", "dtype": jnp.float32, **kw}
  why = cluster_epoch_mgpu.problem(widths, batch, **args)
  assert why is not None and message in why and "\n" not in why


@pytest.mark.parametrize("hidden", [64, 512, 1024])
def test_networks_it_takes(hidden):
  assert cluster_epoch_mgpu.problem((32, hidden, 1), 256, bias=False, optimizer="sgd",
                                    dtype=jnp.float32) is None


def test_the_kernel_refuses_widths_it_would_not_train_whole():
  """The kernel itself (not only ``problem``) refuses a width whose units would not all have a
  CTA (32-1088-1: two clusters of 512 and 64 units over)."""
  f32, steps, hidden = jnp.float32, 1, 1088
  shapes = [((32, hidden), f32), ((hidden,), f32), ((steps, 256, 32), f32), ((steps, 256), f32)]
  fn = jax.jit(lambda w0, w1, xs, ys: cluster_epoch_mgpu.train_steps(w0, w1, xs, ys, 0.002))
  with pytest.raises(ValueError, match="hidden width 1088"):
    fn.trace(*(jax.ShapeDtypeStruct(s, d) for s, d in shapes))
