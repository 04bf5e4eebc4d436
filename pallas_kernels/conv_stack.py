"""Two 3x3 valid convolutions with bias and ReLU, then a 2x2 max-pool: the CNN's features, with
the lower convolution's weight gradient fused into the upper one's input gradient.

Run as two ops, the backward writes the upper convolution's input gradient (batch 64: 2.8 MB)
for the lower convolution's dw kernel to read back, one more launch a step. Here the program
that computes a block of that gradient (``conv.dx_tile``) goes on at once: it applies the lower
ReLU's gradient, g = dx [y1 > 0], gathers the lower convolution's input windows at the same
pixels and adds x_cols^T @ g into its own partial of the lower dw (and the sum of g into db's).
The partials, one a program, are added up after the kernel in a fixed order, in runs of 16
first (``common.sum_many_parts``).

The input x is data: it gets no gradient (the CNN's images need none).

  forward   ``conv.conv_relu`` (lower), then ``conv_pool``'s fused conv + ReLU + pool (upper)
  backward  ``conv_pool.weight_grad_parts`` (max-pool's backward, the upper dw), then this module's
            kernel for the lower dw
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels import common, conv, conv_pool


def conv_stack_reference(x, w1, b1, w2, b2):
  """The plain-jnp twin, with exact float32 products."""
  return conv_pool.conv_relu_pool_reference(conv.conv_relu_reference(x, w1, b1), w2, b2)


def dx_then_dw_kernel(g_ref, w_ref, y1_ref, x_ref, dw_ref, db_ref, *, h, w, c0, c1, c2,
                      block_p, dx_precision, dw_precision, wide):
  """g: the upper pre-activation gradient; w: the upper weights; y1: the lower output (h x w,
  c1 channels), x: the lower input ((h + 2) x (w + 2), c0 channels)."""
  b, i = pl.program_id(0), pl.program_id(1)
  p = i * block_p + jnp.arange(block_p)  # Pixels of the lower output (the upper input).
  ok = p < h * w
  dx = conv.dx_tile(g_ref, w_ref, b, p, ok, h=h, w=w, cin=c1, cout=c2, precision=dx_precision,
                    wide=wide)
  y1 = common.load_tile(y1_ref, b * h * w + i * block_p, 0, block_p, conv._pad(c1))
  g1 = jnp.where(y1 > 0, dx, 0.0)  # Rows past this image's pixels: dx is 0 there.
  corner = conv._corner(b, p, h + 2, w + 2)
  part = b * pl.num_programs(1) + i
  groups = conv._groups(c0, wide)
  row0 = part * conv._width(groups)
  for group in groups:
    cols = conv._input_cols(x_ref, corner, ok, group, w + 2, c0)
    common.store_tile(dw_ref, row0, 0, common.dot(cols, g1, dw_precision, trans_a=True))
    row0 += group[3]
  common.store_tile(db_ref, part, 0, jnp.sum(g1, axis=0)[None, :])


def dx_then_dw_parts(g, w2, y1, x, *, precision="float32", block_p=64, num_warps=4, wide=False,
                     interpret=False):
  """The lower convolution's dw and db as partial tiles, one a program (``conv.dw_layout``),
  from the upper pre-activation gradient g (NHWC), the upper weights w2, the lower output y1
  and the lower input x."""
  n, h, wd, c1 = y1.shape
  c0, c2 = x.shape[-1], w2.shape[-1]
  grid = (n, pl.cdiv(h * wd, block_p))
  rows = conv._width(conv._groups(c0, wide))
  parts = grid[0] * grid[1]
  kernel = functools.partial(dx_then_dw_kernel, h=h, w=wd, c0=c0, c1=c1, c2=c2,
                             block_p=block_p, dw_precision=precision, wide=wide,
                             # dx as conv_dx computes it; the lower dw as conv_dw does.
                             dx_precision=conv.dx_precision(precision, interpret))
  return pl.pallas_call(
      kernel, out_shape=[jax.ShapeDtypeStruct((parts * rows, conv._pad(c1)), x.dtype),
                         jax.ShapeDtypeStruct((parts, conv._pad(c1)), x.dtype)],
      grid=grid, compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="conv_dx_then_dw")(g.reshape(-1, c2), w2.reshape(9 * c1, c2), y1.reshape(-1, c1),
                              x.reshape(-1, c0))


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7))
def conv_stack(x, w1, b1, w2, b2, precision="float32", blocks=None, interpret=False):
  """``max_pool(ReLU(conv(ReLU(conv(x, w1) + b1), w2) + b2))`` through Pallas kernels; x gets
  no gradient (a zero cotangent)."""
  return _vjp_fwd(x, w1, b1, w2, b2, precision, blocks, interpret)[0]


def _vjp_fwd(x, w1, b1, w2, b2, precision, blocks, interpret):
  y1 = conv.conv_relu(x, w1, b1, precision, blocks, interpret)
  return upper_forward(x, y1, w2, b2, precision, blocks, interpret)


def upper_forward(x, y1, w2, b2, precision, blocks, interpret):
  """The upper convolution + ReLU + pool on the lower one's output y1 (of input x): (its output,
  the residuals ``grad_parts`` takes)."""
  y, (_, _, arg) = conv_pool._vjp_fwd(y1, w2, b2, precision, blocks, interpret)
  return y, (x, y1, w2, arg)


def pool_of(res):
  """(the pool's chosen positions, the shape of the map it pooled), from the forward's
  residuals: for an output layer that spreads its input's gradient itself
  (``dense_xent.head_call``'s ``pool``)."""
  _, y1, w2, arg = res
  n, h, w, _ = y1.shape
  return arg, (n, h - 2, w - 2, w2.shape[-1])


def grad_parts(res, dy, precision, blocks, interpret, g=None):
  """The backward as partial tiles (``conv.dw_layout``): (dw1, db1, dw2, db2) parts, from the
  forward's residuals and the pooled output's gradient dy, or ``g``, dy already spread to the
  upper convolution's output (``pool_of``)."""
  x, y1, w2, arg = res
  g, dw2, db2, cfg = conv_pool.weight_grad_parts(y1, w2.shape[-1], arg, dy, precision, blocks,
                                                 interpret, g=g)
  dw1, db1 = dx_then_dw_parts(g, w2, y1, x, precision=precision, wide=cfg["wide"],
                              interpret=interpret, block_p=cfg["dx_p"],
                              num_warps=cfg["dx_warps"])
  return dw1, db1, dw2, db2


def _vjp_bwd(precision, blocks, interpret, res, dy):
  x, y1, w2, _ = res
  dw1, db1, dw2, db2 = grad_parts(res, dy, precision, blocks, interpret)
  # conv1's parts, one a dx program (batch 64: 704), are too many for one chain of adds.
  dw1, db1 = conv.sum_dw_parts(dw1, db1, x.shape[-1], y1.shape[-1], add=common.sum_many_parts)
  dw2, db2 = conv.sum_dw_parts(dw2, db2, y1.shape[-1], w2.shape[-1])
  return jnp.zeros_like(x), dw1, db1, dw2, db2


conv_stack.defvjp(_vjp_fwd, _vjp_bwd)
