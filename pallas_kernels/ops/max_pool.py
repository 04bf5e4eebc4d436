"""2x2 max-pool with stride 2 (NHWC; an odd last row or column is dropped, as 'VALID').

Forward: a program owns ``block_p`` output pixels and all channels, reads the four window
positions, and writes the maximum and which position held it (0..3, the first on ties, as XLA),
which is all the backward needs. Backward: a program owns ``block_p`` input pixels and writes
each one's gradient, ``dy`` of its window where it was the chosen position, else 0, so every
element of dx is written once, also the uncovered odd edge.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common

DEFAULT_BLOCKS = dict(block_p=128)


def reference(x):
  """The plain-jnp twin."""
  return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _tile(ref, rows, ok, c):
  cols = jnp.arange(pl.next_power_of_2(c))
  return cols, jnp.where(ok, rows, 0)[:, None], ok[:, None] & (cols[None, :] < c)


def pool_fwd_kernel(x_ref, y_ref, arg_ref, *, h, w, c, block_p):
  oh_n, ow_n = h // 2, w // 2
  q = pl.program_id(0) * block_p + jnp.arange(block_p)
  ok = q < y_ref.shape[0]
  b, oh, ow = q // (oh_n * ow_n), (q // ow_n) % oh_n, q % ow_n
  best, arg = None, None
  for k in range(4):
    rows = b * h * w + (2 * oh + k // 2) * w + (2 * ow + k % 2)
    cols, r, mask = _tile(x_ref, rows, ok, c)
    v = plgpu.load(x_ref.at[r, cols[None, :]], mask=mask, other=0.0)
    if k == 0:
      best, arg = v, jnp.zeros(v.shape, jnp.int32)
    else:
      arg = jnp.where(v > best, k, arg)  # Strictly greater: the first maximum wins.
      best = jnp.maximum(best, v)
  common.store_tile(y_ref, pl.program_id(0) * block_p, 0, best)
  common.store_tile(arg_ref, pl.program_id(0) * block_p, 0, arg)


def pool_bwd_kernel(dy_ref, arg_ref, dx_ref, *, h, w, c, block_p):
  oh_n, ow_n = h // 2, w // 2
  p = pl.program_id(0) * block_p + jnp.arange(block_p)  # Global input pixel.
  ok = p < dx_ref.shape[0]
  b, ih, iw = p // (h * w), (p // w) % h, p % w
  covered = ok & (ih // 2 < oh_n) & (iw // 2 < ow_n)
  q = b * oh_n * ow_n + (ih // 2) * ow_n + iw // 2
  cols, r, mask = _tile(dy_ref, q, covered, c)
  dy = plgpu.load(dy_ref.at[r, cols[None, :]], mask=mask, other=0.0)
  arg = plgpu.load(arg_ref.at[r, cols[None, :]], mask=mask, other=-1)
  which = ((ih % 2) * 2 + iw % 2)[:, None]
  common.store_tile(dx_ref, pl.program_id(0) * block_p, 0, jnp.where(arg == which, dy, 0.0))


def spread_tile(dx_ref, arg_ref, r0, c0, dy, *, h, w, c):
  """Store a (rows, cols) tile of the pooled gradient, rows r0.. of images, cols c0.. of their
  flattened (PH, PW, c) pooled maps, at the positions its pool chose in dx ((B * h * w, c), the
  input's gradient), 0 at the other three of each window. ``arg_ref``: the chosen positions as
  (B, PH * PW * c). For even h and w: then every element of dx is in one window and written here
  (by the program that owns its pooled pixel)."""
  pw_n = w // 2
  rows, cols = common.span(r0, dy.shape[0]), common.span(c0, dy.shape[1])
  ok = (rows[:, None] < arg_ref.shape[0]) & (cols[None, :] < arg_ref.shape[1])
  arg = plgpu.load(arg_ref.at[rows[:, None], cols[None, :]], mask=ok, other=-1)
  q, ch = cols // c, cols % c
  # Lanes outside the arrays get rows past dx's end, one each (masked: no two lanes store one
  # element).
  past = (dx_ref.shape[0] + jnp.arange(dy.shape[0])[:, None] * dy.shape[1]
          + jnp.arange(dy.shape[1])[None, :])
  for k in range(4):  # Window position (k // 2, k % 2).
    pixel = rows[:, None] * h * w + ((2 * (q // pw_n) + k // 2) * w + 2 * (q % pw_n) + k % 2)
    plgpu.store(dx_ref.at[jnp.where(ok, pixel, past), jnp.broadcast_to(ch[None, :], ok.shape)],
                jnp.where(arg == k, dy, 0.0).astype(dx_ref.dtype), mask=ok)


def pool_fwd(x, *, block_p=128, num_warps=4, interpret=False):
  n, h, w, c = x.shape
  m = n * (h // 2) * (w // 2)
  kernel = functools.partial(pool_fwd_kernel, h=h, w=w, c=c, block_p=block_p)
  y, arg = pl.pallas_call(
      kernel, out_shape=[jax.ShapeDtypeStruct((m, c), x.dtype),
                         jax.ShapeDtypeStruct((m, c), jnp.int32)],
      grid=(pl.cdiv(m, block_p),), compiler_params=common.compiler_params(num_warps, 1),
      interpret=interpret, name="max_pool_fwd")(x.reshape(-1, c))
  return y.reshape(n, h // 2, w // 2, c), arg


def pool_bwd(dy, arg, x_shape, *, block_p=128, num_warps=4, interpret=False):
  n, h, w, c = x_shape
  kernel = functools.partial(pool_bwd_kernel, h=h, w=w, c=c, block_p=block_p)
  dx = pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((n * h * w, c), dy.dtype),
      grid=(pl.cdiv(n * h * w, block_p),), compiler_params=common.compiler_params(num_warps, 1),
      interpret=interpret, name="max_pool_bwd")(dy.reshape(-1, c), arg)
  return dx.reshape(x_shape)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _max_pool(x, blocks=None, interpret=False):
  return pool_fwd(x, interpret=interpret, **common.blocks(DEFAULT_BLOCKS, blocks))[0]


def _pool_vjp_fwd(x, blocks, interpret):
  y, arg = pool_fwd(x, interpret=interpret, **common.blocks(DEFAULT_BLOCKS, blocks))
  return y, (arg, x)  # x only for its shape; it is alive anyway (the conv's residual).


def _pool_vjp_bwd(blocks, interpret, res, dy):
  arg, x = res
  return (pool_bwd(dy, arg, x.shape, interpret=interpret,
                   **common.blocks(DEFAULT_BLOCKS, blocks)),)


_max_pool.defvjp(_pool_vjp_fwd, _pool_vjp_bwd)


def max_pool(x, *, blocks=None, interpret=False):
  return _max_pool(x, blocks, interpret)
