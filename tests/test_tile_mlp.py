"""tile_mlp_mgpu (the MLP 784-256-1024-256-10 on resident weight tiles) on the CPU: the kernel
lowers for a Hopper GPU (Mosaic GPU's checks of layouts, shared memory and copies run at
lowering), its jnp twin follows the project's float64 training step, and networks it cannot
take are refused in one line. Its numbers on the GPU: ``experiments.check_kernels
--only=tile_mlp`` on the device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, train
from pallas_kernels.fused import tile_mlp_mgpu as k


def _lowered(steps, fresh=None):
  f32 = jnp.float32
  shapes = [{"w": jax.ShapeDtypeStruct((a, b), f32), "b": jax.ShapeDtypeStruct((b,), f32)}
            for a, b in zip(k.WIDTHS[:-1], k.WIDTHS[1:])]
  xs = jax.ShapeDtypeStruct((steps, k.BATCH, k.INPUTS), jnp.bfloat16)
  onehot = jax.ShapeDtypeStruct((steps, k.BATCH, k.T), f32)
  fn = jax.jit(lambda p, x, o: k.train_steps(p, x, o, 0.1, fresh_descriptors=fresh))
  return fn.trace(shapes, xs, onehot).lower(lowering_platforms=("cuda",)).as_text()


@pytest.mark.parametrize("steps", [1, 3])
def test_kernel_lowers(steps):
  text = _lowered(steps)
  assert "mosaic_gpu" in text and "red.release.gpu.global.add" in text  # The grid barrier
  assert "fence.proxy.async.global" in text  # Before copies read what other CTAs wrote


def test_fresh_descriptors_lower():
  """``FRESH_DESCRIPTORS`` (each product's descriptors built where it runs; on by default since
  the H100 run of 2026-12-07) lowers for Hopper both on and off, and the two differ."""
  assert _lowered(2, True) != _lowered(2, False)


def _data(rng, steps):
  n = steps * k.BATCH + 5
  x = rng.integers(0, 256, (n, 784), dtype=np.uint8)
  y = rng.integers(0, 10, n).astype(np.int32)
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), k.WIDTHS)
  params = jax.tree.map(lambda a: a + 0.01 * jnp.asarray(rng.standard_normal(a.shape), a.dtype),
                        params)  # Biases off 0, so that their gradients count
  return params, x, y, rng.permutation(n).astype(np.int32)


def test_twin_follows_train_step_in_float64():
  """The twin's arithmetic (the pixels as integers scaled by 1/255 after each tile's product,
  its sums over K tiles in the kernel's orders, the padded classes) is the project's training
  step: float64 trajectories within 1e-10, the same correct counts."""
  rng = np.random.default_rng(0)
  params, x, y, order = _data(rng, 3)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    got, losses, _ = k.train_epoch(p64, jnp.asarray(x), jnp.asarray(y), order, 0.1, steps=3,
                                   use_kernel=False)
    tx = train.make_optimizer("sgd", 0.1)
    p, state, want = p64, tx.init(p64), []
    for s in range(3):
      idx = order[s * k.BATCH:(s + 1) * k.BATCH]
      p, state, m = train.train_step(p, state, (jnp.asarray(x[idx] / 255.0), jnp.asarray(y[idx])),
                                     tx=tx, model=models.MLP)
      want.append(float(m["loss"]))
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-10)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-13)


def test_twin_in_float32_is_near_float64():
  rng = np.random.default_rng(1)
  params, x, y, order = _data(rng, 3)
  got, losses, _ = k.train_epoch(params, jnp.asarray(x), jnp.asarray(y), order, 0.1, steps=3,
                                 use_kernel=False)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    want, want_losses, _ = k.train_epoch(p64, jnp.asarray(x), jnp.asarray(y), order, 0.1,
                                         steps=3, use_kernel=False)
  np.testing.assert_allclose(np.asarray(losses), np.asarray(want_losses), rtol=1e-5)


@pytest.mark.parametrize("widths,batch,bias,optimizer,dtype,words", [
    ((784, 256, 10), 64, True, "sgd", jnp.float32, "784-256-1024-256-10"),
    (k.WIDTHS, 128, True, "sgd", jnp.float32, "batch"),
    (k.WIDTHS, 64, False, "sgd", jnp.float32, "biases"),
    (k.WIDTHS, 64, True, "adam", jnp.float32, "sgd"),
])
def test_refuses_in_one_line(widths, batch, bias, optimizer, dtype, words):
  why = k.problem(widths, batch, bias=bias, optimizer=optimizer, dtype=dtype)
  assert why and "\n" not in why and words.lower() in why.lower()
