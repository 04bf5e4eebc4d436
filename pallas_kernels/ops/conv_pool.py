"""Fused 3x3 valid convolution + bias + ReLU + 2x2 max-pool (stride 2), and its backward.

The CNN's second convolution feeds a max-pool. Run apart, the convolution writes its whole
output (batch 64: 4.7 MB) for the pool to read back, and the backward needs the pool's
backward, then ReLU's gradient, as two more passes over a map of that size. Here:

  forward   a program owns ``block_q`` pooled pixels of one image and all output channels. It
            computes the four convolution outputs under each pooled pixel (four accumulators,
            each the nine taps' products, as ``conv.py`` does; or, float32's default, all four
            from the 4 x 4 input patch by Winograd's F(2x2, 3x3), ``winograd.py``, in 16
            products instead of 36), adds the bias, keeps the
            largest, and stores ReLU of it and which of the four positions held it (0..3, the
            first on ties, as XLA), or -1 where the pooled value is not positive: there
            ReLU's gradient is 0 at every position. The convolution's output never reaches
            memory. Given the next layer's weights (``head_w``, a dense layer on the flattened
            pooled map), it also stores its pooled pixels' share of that layer's outputs,
            which the layer's kernel adds up (``dense_xent.head_call``'s ``logits_parts``)
            instead of computing them in a launch of its own.
  backward  ``max_pool``'s backward kernel spreads the pooled gradient to the chosen positions
            (nowhere for -1): that is already the gradient of the convolution's
            pre-activation, which ``conv.py``'s dw and dx kernels take.

Inside, tensors are 2-D as in ``conv.py``: images (B*H*W, C), weights (9*cin, cout).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common
from pallas_kernels.ops import conv, max_pool
from pallas_kernels.ops.winograd import outputs as winograd_outputs

# Pooled pixels per program and warps of the forward kernel, for float32 and the tensor-core
# precisions (``conv.units``): the fastest of a sweep at the CNN's conv2 (batch 64, a tile per
# tap; docs/design/op_kernels.md). ``patch``: load the 4 x 4 input patch's 16 tiles once each
# rather than a tile per (position, tap), 36 (the same bits; faster on the tensor cores, slower
# in float32 on the FMA units). ``winograd``: the four positions from the patch by F(2x2, 3x3)
# (``winograd.py``), 16 products instead of 36: faster in float32, also in the CNN's step,
# slower in tf32 and bfloat16 than ``patch``. ``blocks`` overrides: block_q here, num_warps here
# and in the backward's dw and dx kernels, patch, winograd, the rest as ``conv.config``.
DEFAULT_BLOCKS = {"float32": dict(block_q=32, num_warps=4, patch=False, winograd=True),
                  "tensor": dict(block_q=64, num_warps=4, patch=True, winograd=False)}


def reference(x, w, b):
  """The plain-jnp twin, with exact float32 products."""
  return max_pool.reference(conv.reference(x, w, b))


def head_logits_tile(head_ref, y, q, ok, cout, n_classes):
  """The dense layer's outputs over this program's pooled pixels q (rows of y, channels as
  columns), ``sum(y[q, c] * head_w[q * cout + c])``: h's flattened NHWC index. Exact float32
  products at every precision (under 1 % of the CNN step's arithmetic)."""
  co, n = jnp.arange(y.shape[1]), jnp.arange(common.tile_side(n_classes))
  mask = ((ok[:, None] & (co < cout)[None, :])[:, :, None] & (n < n_classes)[None, None, :])
  rows = jnp.where(mask, (q[:, None] * cout + co[None, :])[:, :, None], 0)
  w = plgpu.load(head_ref.at[rows, jnp.broadcast_to(n[None, None, :], rows.shape)], mask=mask,
                 other=0.0)
  return jnp.sum(jnp.sum(y[:, :, None].astype(w.dtype) * w, axis=0), axis=0)


def conv_relu_pool_kernel(x_ref, w_ref, b_ref, *refs, h, w, cin, cout, block_q, precision, wide,
                          patch, winograd=False, n_classes=None):
  # With n_classes: refs are the head's weights, then y, arg and the partial logits.
  head_ref, (y_ref, arg_ref, *z_ref) = (refs[0], refs[1:]) if n_classes else (None, refs)
  pw_n = (w - 2) // 2  # Pooled columns; an odd last row or column of the conv is dropped.
  n_pooled = ((h - 2) // 2) * pw_n
  b, q = pl.program_id(0), pl.program_id(1) * block_q + jnp.arange(block_q)
  ok = q < n_pooled
  ph, pw = q // pw_n, q % pw_n
  acc = [jnp.zeros((block_q, common.tile_side(cout)), common.acc_dtype(x_ref.dtype))] * 4
  groups = conv._groups(cin, wide)
  top = b * h * w + 2 * ph * w + 2 * pw
  if winograd and len(groups) == 9:  # A tile per tap: F(2x2, 3x3) on the 4 x 4 patch.
    d = lambda r, s: conv._input_cols(x_ref, top + r * w + s, ok, groups[0], w, cin)
    g = [[conv._weight_rows(w_ref, groups[3 * r + s], cin, cout) for s in range(3)]
         for r in range(3)]
    acc = winograd_outputs(d, g, precision)
  elif patch and len(groups) == 9:
    # The four positions' nine taps read 16 input offsets: the 4 x 4 patch under the window.
    # Each offset's tile loaded once serves every (position, tap) that reads it. Each
    # position still adds its taps in order 0..8: the same bits as the tile-per-tap loop.
    w_rows = [conv._weight_rows(w_ref, group, cin, cout) for group in groups]
    for o in range(16):
      cols = conv._input_cols(x_ref, top + (o // 4) * w + o % 4, ok, groups[0], w, cin)
      for k in range(4):
        di, dj = o // 4 - k // 2, o % 4 - k % 2
        if 0 <= di < 3 and 0 <= dj < 3:
          acc[k] += common.dot(cols, w_rows[3 * di + dj], precision)
  else:
    for group in groups:
      w_rows = conv._weight_rows(w_ref, group, cin, cout)  # Once for the four positions.
      for k in range(4):  # Window position (k // 2, k % 2): its conv pixel's tap (0, 0) row.
        corner = b * h * w + (2 * ph + k // 2) * w + 2 * pw + k % 2
        acc[k] += common.dot(conv._input_cols(x_ref, corner, ok, group, w, cin), w_rows,
                             precision)
  co = jnp.arange(common.tile_side(cout))
  bias = plgpu.load(b_ref.at[co], mask=co < cout, other=0.0)[None, :]
  best, arg = acc[0] + bias, jnp.zeros(acc[0].shape, jnp.int32)
  for k in range(1, 4):  # The bias first, so that ties are those of the biased values.
    v = acc[k] + bias
    arg = jnp.where(v > best, k, arg)  # Strictly greater: the first maximum wins.
    best = jnp.maximum(best, v)
  row0 = b * n_pooled + pl.program_id(1) * block_q
  y = jnp.maximum(best, 0.0).astype(y_ref.dtype)
  common.store_tile(y_ref, row0, 0, y, row_ok=ok)
  common.store_tile(arg_ref, row0, 0, jnp.where(best > 0, arg, -1), row_ok=ok)
  if n_classes:  # Program (b, j)'s partial: row j * B + b.
    z = head_logits_tile(head_ref, y, q, ok, cout, n_classes)
    common.store_tile(z_ref[0], pl.program_id(1) * pl.num_programs(0) + b, 0, z[None, :])


def _config(precision, blocks, cin=None):
  """(forward's block_q and num_warps, ``conv.config`` for the backward kernels)."""
  over = dict(blocks or ())
  bwd = conv.config(precision, [(k, v) for k, v in over.items() if k != "block_q"], cin)
  fwd = dict(DEFAULT_BLOCKS[conv.units(precision)])
  fwd.update({k: over[k] for k in ("block_q", "num_warps", "patch", "winograd") if k in over})
  return fwd, bwd


def backward_config(precision, blocks, cin):
  """``conv.config`` for the backward kernels (dw, dx) of a ``cin``-channel input."""
  return _config(precision, blocks, cin)[1]


def conv_relu_pool_fwd(x, w, b, *, head_w=None, precision="float32", block_q=32, num_warps=4,
                       wide=False, patch=False, winograd=False, interpret=False):
  """Pooled ReLU(conv(x, w) + b), NHWC, and the chosen positions ((B*PH*PW, cout) int32); with
  ``head_w`` (PH*PW*cout, classes), also the partial logits of the flattened pooled map times
  head_w: (programs an image * B, classes padded to c_pad) float32, program j's at rows j * B."""
  (n, h, wd, cin), cout = x.shape, w.shape[-1]
  ph_n, pw_n = (h - 2) // 2, (wd - 2) // 2
  grid = (n, pl.cdiv(ph_n * pw_n, block_q))
  m = n * ph_n * pw_n
  out_shape = [jax.ShapeDtypeStruct((m, cout), x.dtype),
               jax.ShapeDtypeStruct((m, cout), jnp.int32)]
  head, n_classes = ([], None) if head_w is None else ([head_w], head_w.shape[1])
  if head:
    out_shape.append(jax.ShapeDtypeStruct(
        (grid[1] * n, common.tile_side(n_classes)), common.acc_dtype(x.dtype)))
  kernel = functools.partial(conv_relu_pool_kernel, h=h, w=wd, cin=cin, cout=cout,
                             block_q=block_q, precision=precision, wide=wide, patch=patch,
                             winograd=winograd, n_classes=n_classes)
  y, arg, *z = pl.pallas_call(
      kernel, out_shape=out_shape, grid=grid,
      compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="conv_relu_pool")(x.reshape(-1, cin), w.reshape(9 * cin, cout), b, *head)
  return (y.reshape(n, ph_n, pw_n, cout), arg, *z)


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _conv_relu_pool(x, w, b, precision="float32", blocks=None, interpret=False):
  return _vjp_fwd(x, w, b, precision, blocks, interpret)[0]


def _vjp_fwd(x, w, b, precision, blocks, interpret):
  y, arg = forward(x, w, b, precision, blocks, interpret)
  return y, (x, w, arg)


def forward(x, w, b, precision, blocks, interpret, head_w=None):
  """``conv_relu_pool_fwd`` at the configured blocks."""
  fwd, bwd = _config(precision, blocks)
  return conv_relu_pool_fwd(x, w, b, head_w=head_w, precision=precision, wide=bwd["wide"],
                            interpret=interpret, **fwd)


def weight_grads(x, cout, arg, dy, precision, blocks, interpret):
  """The backward up to the weights: (g, dw, db, the backward's ``conv.config``), g the
  convolution's pre-activation gradient, for the caller's dx."""
  cfg = backward_config(precision, blocks, x.shape[-1])
  n, h, wd, _ = x.shape
  # The pooled gradient at the chosen positions (-1: none) is the conv's pre-activation gradient.
  g = max_pool.pool_bwd(dy, arg, (n, h - 2, wd - 2, cout), interpret=interpret,
                        **max_pool.DEFAULT_BLOCKS)
  dw, db = conv.conv_dw(x, g, precision=precision, wide=cfg["wide"], interpret=interpret,
                        block_p=cfg["dw_p"], num_warps=cfg["dw_warps"],
                        num_stages=cfg["dw_stages"], taps=cfg["dw_taps"], splits=cfg["splits"])
  return g, dw, db, cfg


def _vjp_bwd(precision, blocks, interpret, res, dy):
  x, w, arg = res
  g, dw, db, cfg = weight_grads(x, w.shape[-1], arg, dy, precision, blocks, interpret)
  dx = conv.conv_dx(g, w, x.shape, precision=precision, wide=cfg["wide"], interpret=interpret,
                    block_p=cfg["dx_p"], num_warps=cfg["dx_warps"])
  return dx, dw, db


_conv_relu_pool.defvjp(_vjp_fwd, _vjp_bwd)


def conv_relu_pool(x, w, b, *, precision="float32", blocks=None, interpret=False):
  """``max_pool(ReLU(conv3x3_valid(x, w) + b))`` through Pallas kernels, forward and backward."""
  return _conv_relu_pool(x, w, b, precision, blocks, interpret)
