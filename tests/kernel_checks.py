"""Helpers shared by the kernel tests: float64 references and their comparison (interpret mode
on the CPU fills unwritten outputs with NaN, which ``rel_err`` refuses)."""

import jax
import jax.numpy as jnp
import numpy as np

TOL = 1e-5  # float32 against float64, relative Frobenius norm.

# Blocks of the convolution tests (test_conv, test_conv_stack, test_conv_pool).
SMALL_BLOCKS = (("block_p", 32), ("splits", 4), ("dw_taps", 2))  # dw: runs of 2, 2, 2, 2, 1 taps.
WIDE = (("wide", True),)


def rel_err(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  assert np.all(np.isfinite(a)), "non-finite (unwritten?) output"
  return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def assert_trajectory_close(got, want, what="", tol=1e-10):
  """Two float64 trajectories' arrays agree within ``tol`` of the array's scale (max |want|).

  Per leaf, not per element: Adam's update m / (sqrt(v) + eps) amplifies a gradient element's
  rounding by up to lr / eps where that gradient is near zero, so one element of 5120 can move
  1.5e-10 of itself (seen in CI: 7e-12 on a weight of 0.048) while the array as a whole sits at
  1e-13 of its scale (60 fresh draws of the CNN's Adam epoch: worst 2.5e-13)."""
  for a, b in zip(got, want, strict=True):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} and {b.shape}"
    scale = max(float(np.abs(b).max(initial=0.0)), 1e-300)
    err = float(np.abs(a - b).max(initial=0.0)) / scale
    assert err <= tol, f"{what}: max |got - want| is {err:.2e} of max |want| ({scale:.3g})"


def clear_of_relu_kink(dy, z64, margin=1e-4):
  """``dy`` with zeros where the float64 pre-activation ``z64`` lies within ``margin`` of 0.

  There the float32 kernel and the float64 reference may rightly fall on different sides of the
  ReLU (a pre-activation of 1e-7 rounds either way), and one such element moves a whole row of
  dx: the fresh random inputs of these tests hit one now and then (dx errors of 3e-3 and 2e-2
  seen in CI). Both sides get the same cleared cotangent, so the test still checks every output
  of the kernels, each against the gradient it should have."""
  return np.where(np.abs(z64) < margin, 0.0, dy).astype(np.float32)


def float64_steps(params, x, y, order, lr, steps, batch, model):
  """``steps`` plain-SGD steps of the project's train_step in float64 on ``order``'s batches:
  (each step's loss, the final params)."""
  from jaxshallow import train
  with jax.enable_x64(True):
    p = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    tx = train.make_optimizer("sgd", lr)
    state, losses = tx.init(p), []
    for s in range(steps):
      idx = order[s * batch:(s + 1) * batch]
      p, state, m = train.train_step(p, state, (jnp.float64(x[idx]), jnp.float64(y[idx])),
                                     tx=tx, model=model)
      losses.append(float(m["loss"]))
    return losses, p


def conv_pre_activation64(x, w, b):
  """The float64 convolution's pre-activation ``conv(x, w) + b`` (NHWC, HWIO, VALID)."""
  with jax.enable_x64(True):
    z = jax.lax.conv_general_dilated(
        jnp.asarray(x, jnp.float64), jnp.asarray(w, jnp.float64), (1, 1), "VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC"), precision="highest")
    return np.asarray(z + jnp.asarray(b, jnp.float64))


def clear_of_pool_ties(dy, z64, margin=1e-4):
  """``dy`` (n, p, p, c), the cotangent of ``max_pool(relu(z))``, with zeros at the 2 x 2
  windows of the float64 pre-activation ``z64`` (n, h, h, c) whose two largest candidates (the
  four values and ReLU's 0) lie within ``margin``: there float32 and float64 may rightly send
  the gradient to different places (a tie, or a ReLU kink), and one such element moves dw by
  about 1e-2 of itself (about one run in a thousand of the conv tests' fresh draws). Both sides
  get the same cleared cotangent, as ``clear_of_relu_kink``."""
  n, p, _, c = dy.shape
  windows = z64[:, :2 * p, :2 * p].reshape(n, p, 2, p, 2, c).transpose(0, 1, 3, 5, 2, 4)
  candidates = np.concatenate([windows.reshape(n, p, p, c, 4), np.zeros((n, p, p, c, 1))], -1)
  top = np.sort(candidates, axis=-1)
  return np.where(top[..., -1] - top[..., -2] < margin, 0.0, dy).astype(np.float32)


def reference_vjp(fn, args, cotangent):
  """Value and input gradients of ``fn`` in float64."""
  with jax.enable_x64(True):
    args64 = [None if a is None else jnp.asarray(a, jnp.float64) for a in args]
    y, vjp = jax.vjp(fn, *args64)
    return np.asarray(y), [None if g is None else np.asarray(g)
                           for g in vjp(jnp.asarray(cotangent, jnp.float64))]
