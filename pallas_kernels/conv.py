"""Fused 3x3 valid convolution + bias + ReLU (NHWC images, HWIO weights).

An implicit GEMM: a program owns ``block_p`` output pixels of one image and all output channels,
and accumulates nine tap products, ``x[pixels shifted by (di, dj)] @ w[di, dj]``, gathering the
shifted input rows with masked loads instead of materialising im2col in memory. Channels are
padded to a power of two of at least 16 (Triton's smallest dot) by the masks, so any channel
count works; bias and ReLU are applied in registers before the one store.

Backward (``g = dy * [y > 0]`` inside each kernel):
  dx   a program owns ``block_p`` input pixels: sum over taps of g[pixels - (di, dj)] @ w[di, dj]^T
  dw   a (tap, split) grid: each program sums x_tap^T @ g over its share of all output pixels
       into a partial (cin, cout) tile; the partials (and db, from tap 0) are added up after
       it, in a fixed order (``common.sum_parts``).

Inside, tensors are 2-D: images (B*H*W, C), weights (9*cin, cout) with row (3*di + dj)*cin + ci.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common

DEFAULT_BLOCKS = dict(block_p=128, splits=32)
TAPS = [(di, dj) for di in range(3) for dj in range(3)]


def conv_relu_reference(x, w, b):
  """The plain-jnp twin, with exact float32 products."""
  y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", precision=jax.lax.Precision.HIGHEST,
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return jax.nn.relu(y + b)


def _pad(c):
  return max(16, pl.next_power_of_2(c))


def _gather(ref, rows, ok, n_cols, n_cols_pad):
  """``ref[rows, :n_cols]`` as a (len(rows), n_cols_pad) tile, zeros where ``ok`` is False."""
  cols = jnp.arange(n_cols_pad)
  rows = jnp.where(ok, rows, 0)
  mask = ok[:, None] & (cols[None, :] < n_cols)
  return plgpu.load(ref.at[rows[:, None], cols[None, :]], mask=mask, other=0.0)


def _relu_grad(dy_ref, y_ref, rows, ok, cout, cout_p):
  g = _gather(dy_ref, rows, ok, cout, cout_p)
  return jnp.where(_gather(y_ref, rows, ok, cout, cout_p) > 0, g, 0.0)


def _tap_weights(w_ref, tap, cin, cout):
  """The (cin, cout) weight matrix of one tap, padded."""
  return _gather(w_ref, tap * cin + jnp.arange(_pad(cin)), jnp.arange(_pad(cin)) < cin, cout,
                 _pad(cout))


# Kernels -------------------------------------------------------------------------------------

def conv_fwd_kernel(x_ref, w_ref, b_ref, y_ref, *, h, w, cin, cout, block_p, precision):
  oh_n, ow_n = h - 2, w - 2
  b, p = pl.program_id(0), pl.program_id(1) * block_p + jnp.arange(block_p)
  ok = p < oh_n * ow_n
  oh, ow = p // ow_n, p % ow_n
  acc = jnp.zeros((block_p, _pad(cout)), common.acc_dtype(x_ref.dtype))
  for t, (di, dj) in enumerate(TAPS):
    xt = _gather(x_ref, b * h * w + (oh + di) * w + (ow + dj), ok, cin, _pad(cin))
    acc += common.dot(xt, _tap_weights(w_ref, t, cin, cout), precision)
  co = jnp.arange(_pad(cout))
  acc = jnp.maximum(acc + plgpu.load(b_ref.at[co], mask=co < cout, other=0.0)[None, :], 0.0)
  common.store_tile(y_ref, b * oh_n * ow_n + pl.program_id(1) * block_p, 0, acc, row_ok=ok)


def conv_dx_kernel(dy_ref, y_ref, w_ref, dx_ref, *, h, w, cin, cout, block_p, precision):
  oh_n, ow_n = h - 2, w - 2
  b, p = pl.program_id(0), pl.program_id(1) * block_p + jnp.arange(block_p)
  ok = p < h * w
  ih, iw = p // w, p % w
  acc = jnp.zeros((block_p, _pad(cin)), common.acc_dtype(dy_ref.dtype))
  for t, (di, dj) in enumerate(TAPS):
    oh, ow = ih - di, iw - dj
    tap_ok = ok & (oh >= 0) & (oh < oh_n) & (ow >= 0) & (ow < ow_n)
    g = _relu_grad(dy_ref, y_ref, b * oh_n * ow_n + oh * ow_n + ow, tap_ok, cout, _pad(cout))
    acc += common.dot(g, _tap_weights(w_ref, t, cin, cout), precision, trans_b=True)
  common.store_tile(dx_ref, b * h * w + pl.program_id(1) * block_p, 0, acc, row_ok=ok)


def conv_dw_kernel(x_ref, dy_ref, y_ref, dw_ref, db_ref, *, h, w, cin, cout, block_p,
                   chunks_per_split, precision):
  oh_n, ow_n = h - 2, w - 2
  n_out = dy_ref.shape[0]
  t, s = pl.program_id(0), pl.program_id(1)
  di, dj = t // 3, t % 3

  def body(c, carry):
    acc, db = carry
    q = (s * chunks_per_split + c) * block_p + jnp.arange(block_p)  # Global output pixel.
    ok = q < n_out
    b, p = q // (oh_n * ow_n), q % (oh_n * ow_n)
    xt = _gather(x_ref, b * h * w + (p // ow_n + di) * w + (p % ow_n + dj), ok, cin, _pad(cin))
    g = _relu_grad(dy_ref, y_ref, q, ok, cout, _pad(cout))
    return acc + common.dot(xt, g, precision, trans_a=True), db + jnp.sum(g, axis=0)

  dtype = common.acc_dtype(x_ref.dtype)
  acc, db = jax.lax.fori_loop(0, chunks_per_split, body,
                              (jnp.zeros((_pad(cin), _pad(cout)), dtype),
                               jnp.zeros((_pad(cout),), dtype)))
  # Partials are stored padded, (9 * splits * cin_p, cout_p), so tiles never overlap.
  common.store_tile(dw_ref, (t * pl.num_programs(1) + s) * _pad(cin), 0, acc)

  @pl.when(t == 0)  # Every tap sums the same g; one stores db.
  def _():
    common.store_tile(db_ref, s, 0, db[None, :])


# pallas_call wrappers (4-D NHWC in and out) ---------------------------------------------------

def _dims(x, w):
  (n, h, wd, cin), cout = x.shape, w.shape[-1]
  return n, h, wd, cin, cout


def conv_fwd(x, w, b, *, precision="float32", block_p=128, num_warps=4, interpret=False):
  n, h, wd, cin, cout = _dims(x, w)
  kernel = functools.partial(conv_fwd_kernel, h=h, w=wd, cin=cin, cout=cout, block_p=block_p,
                             precision=precision)
  y = pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((n * (h - 2) * (wd - 2), cout), x.dtype),
      grid=(n, pl.cdiv((h - 2) * (wd - 2), block_p)),
      compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="conv_fwd")(x.reshape(-1, cin), w.reshape(9 * cin, cout), b)
  return y.reshape(n, h - 2, wd - 2, cout)


def conv_dx(dy, y, w, x_shape, *, precision="float32", block_p=128, num_warps=4,
            interpret=False):
  n, h, wd, cin = x_shape
  cout = w.shape[-1]
  kernel = functools.partial(conv_dx_kernel, h=h, w=wd, cin=cin, cout=cout, block_p=block_p,
                             precision=precision)
  dx = pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((n * h * wd, cin), dy.dtype),
      grid=(n, pl.cdiv(h * wd, block_p)),
      compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="conv_dx")(dy.reshape(-1, cout), y.reshape(-1, cout), w.reshape(9 * cin, cout))
  return dx.reshape(x_shape)


def conv_dw(x, dy, y, *, precision="float32", block_p=128, splits=32, num_warps=4,
            interpret=False):
  n, h, wd, cin = x.shape
  cout = dy.shape[-1]
  chunks = pl.cdiv(dy.size // cout, block_p)
  splits = max(1, min(splits, chunks))
  kernel = functools.partial(conv_dw_kernel, h=h, w=wd, cin=cin, cout=cout, block_p=block_p,
                             chunks_per_split=pl.cdiv(chunks, splits), precision=precision)
  cin_p, cout_p = _pad(cin), _pad(cout)
  dw_parts, db_parts = pl.pallas_call(
      kernel, out_shape=[jax.ShapeDtypeStruct((9 * splits * cin_p, cout_p), x.dtype),
                         jax.ShapeDtypeStruct((splits, cout_p), x.dtype)],
      grid=(9, splits), compiler_params=common.compiler_params(num_warps, 1),
      interpret=interpret, name="conv_dw")(x.reshape(-1, cin), dy.reshape(-1, cout),
                                           y.reshape(-1, cout))
  dw_parts = dw_parts.reshape(3, 3, splits, cin_p, cout_p)[:, :, :, :cin, :cout]
  return common.sum_parts(jnp.moveaxis(dw_parts, 2, 0)), common.sum_parts(db_parts[:, :cout])


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def conv_relu(x, w, b, precision="float32", blocks=None, interpret=False):
  """``ReLU(conv3x3_valid(x, w) + b)`` through Pallas kernels, forward and backward."""
  block_p = common.blocks(DEFAULT_BLOCKS, blocks)["block_p"]
  return conv_fwd(x, w, b, precision=precision, block_p=block_p, interpret=interpret)


def _conv_vjp_fwd(x, w, b, precision, blocks, interpret):
  y = conv_relu(x, w, b, precision, blocks, interpret)
  return y, (x, w, y)


def _conv_vjp_bwd(precision, blocks, interpret, res, dy):
  x, w, y = res
  bl = common.blocks(DEFAULT_BLOCKS, blocks)
  kw = dict(precision=precision, interpret=interpret, block_p=bl["block_p"])
  dw, db = conv_dw(x, dy, y, splits=bl["splits"], **kw)
  return conv_dx(dy, y, w, x.shape, **kw), dw, db


conv_relu.defvjp(_conv_vjp_fwd, _conv_vjp_bwd)
