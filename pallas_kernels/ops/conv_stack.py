"""Two 3x3 valid convolutions with bias and ReLU, then a 2x2 max-pool: the CNN's features, with
the lower convolution's weight gradient fused into the upper one's input gradient.

Run as two ops, the backward writes the upper convolution's input gradient (batch 64: 2.8 MB)
for the lower convolution's dw kernel to read back, one more launch a step. Here the program
that computes a block of that gradient (``conv.dx_tile``) goes on at once: it applies the lower
ReLU's gradient, g = dx [y1 > 0], gathers the lower convolution's input windows at the same
pixels and adds x_cols^T @ g into its own partial of the lower dw (and the sum of g into db's).
The partials, one a program, are added up after the kernel in a fixed order, in runs of 16
first (``common.sum_many_parts``). The same launch also runs the upper convolution's dw
(``conv.dw_program``), whose programs need only what these need: one launch for the whole
backward below the pool, its two kinds of program side by side in one grid, which measured
faster than the two launches (docs/design/op_kernels.md).

The input x is data: it gets no gradient (the CNN's images need none).

  forward   ``conv.conv_relu`` (lower), then ``conv_pool``'s fused conv + ReLU + pool (upper)
  backward  max-pool's backward (``max_pool.pool_bwd``, unless the layer above spread its
            gradient itself), then this module's kernel: the upper dw, and the upper dx on to
            the lower dw
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.ops import conv, conv_pool, max_pool


def reference(x, w1, b1, w2, b2):
  """The plain-jnp twin, with exact float32 products."""
  return conv_pool.reference(conv.reference(x, w1, b1), w2, b2)


# The backward kernel of the upper convolution runs its dw (``conv.dw_program``) in one kind
# of program and dx-then-lower-dw in the other; which kind takes the first program ids, by
# conv.units: the order that measured faster in the CNN (float32 dx first, tf32 dw first).
DX_FIRST = {"float32": True, "tensor": False}


def dx_then_dw_program(g_ref, w_ref, y1_ref, x_ref, dw_ref, db_ref, b, i, per_image, *, h, w,
                       c0, c1, c2, block_p, dx_precision, dw_precision, wide):
  """Program i of image b: g, the upper pre-activation gradient; w, the upper weights; y1, the
  lower output (h x w, c1 channels), x, the lower input ((h + 2) x (w + 2), c0 channels)."""
  p = i * block_p + jnp.arange(block_p)  # Pixels of the lower output (the upper input).
  ok = p < h * w
  dx = conv.dx_tile(g_ref, w_ref, b, p, ok, h=h, w=w, cin=c1, cout=c2, precision=dx_precision,
                    wide=wide)
  y1 = common.load_tile(y1_ref, b * h * w + i * block_p, 0, block_p, common.tile_side(c1))
  g1 = jnp.where(y1 > 0, dx, 0.0)  # Rows past this image's pixels: dx is 0 there.
  corner = conv._corner(b, p, h + 2, w + 2)
  part = b * per_image + i
  groups = conv._groups(c0, wide)
  row0 = part * conv._width(groups)
  for group in groups:
    cols = conv._input_cols(x_ref, corner, ok, group, w + 2, c0)
    common.store_tile(dw_ref, row0, 0, common.dot(cols, g1, dw_precision, trans_a=True))
    row0 += group[3]
  common.store_tile(db_ref, part, 0, jnp.sum(g1, axis=0)[None, :])


def backward_kernel(g_ref, w_ref, y1_ref, x_ref, dw1_ref, db1_ref, dw2_ref, db2_ref, *, n_dx,
                    per_image, n_dw, splits, dx_first, dx_kw, dw_kw):
  pid = pl.program_id(0)
  dx_id, dw_id = (pid, pid - n_dx) if dx_first else (pid - n_dw, pid)
  per_image, splits = np.int32(per_image), np.int32(splits)  # Also when x64 is on.

  @pl.when((dx_id >= 0) & (dx_id < n_dx))
  def _():
    dx_then_dw_program(g_ref, w_ref, y1_ref, x_ref, dw1_ref, db1_ref,
                       jax.lax.div(dx_id, per_image), jax.lax.rem(dx_id, per_image), per_image,
                       **dx_kw)

  @pl.when((dw_id >= 0) & (dw_id < n_dw))
  def _():
    conv.dw_program(y1_ref, g_ref, None, dw2_ref, db2_ref, jax.lax.div(dw_id, splits),
                    jax.lax.rem(dw_id, splits), **dw_kw)


def backward_parts(g, w2, y1, x, *, precision, cfg, interpret=False):
  """The lower and the upper convolution's dw and db as partial tiles (``conv.dw_layout``),
  (dw1, db1, dw2, db2), from the upper pre-activation gradient g (NHWC), the upper weights w2,
  the lower output y1 and the lower input x; ``cfg``: ``conv.config``'s blocks. The lower's
  partials are one a dx program, the upper's one a split."""
  n, h, wd, c1 = y1.shape
  c0, c2 = x.shape[-1], w2.shape[-1]
  per_image = pl.cdiv(h * wd, cfg["dx_p"])
  rows = conv._width(conv._groups(c0, cfg["wide"]))
  dx_kw = dict(h=h, w=wd, c0=c0, c1=c1, c2=c2, block_p=cfg["dx_p"], dw_precision=precision,
               wide=cfg["wide"],  # dx as conv_dx computes it; the lower dw as conv_dw does.
               dx_precision=conv.dx_precision(precision, interpret))
  (runs, splits), dw_kw, dw_shapes = conv.dw_launch(
      y1.shape, c2, precision=precision, block_p=cfg["dw_p"], splits=cfg["splits"],
      taps=cfg["dw_taps"], wide=cfg["wide"], dtype=x.dtype)
  n_dx, n_dw = n * per_image, runs * splits
  kernel = functools.partial(backward_kernel, n_dx=n_dx, per_image=per_image, n_dw=n_dw,
                             splits=splits, dx_first=DX_FIRST[conv.units(precision)],
                             dx_kw=dx_kw, dw_kw=dw_kw)
  # One warp count for both kinds of program (the CNN's defaults agree); dw's pipelining (the
  # dx programs have no loop).
  return pl.pallas_call(
      kernel, out_shape=[jax.ShapeDtypeStruct((n_dx * rows, common.tile_side(c1)), x.dtype),
                         jax.ShapeDtypeStruct((n_dx, common.tile_side(c1)), x.dtype), *dw_shapes],
      grid=(n_dx + n_dw,), compiler_params=common.compiler_params(cfg["dw_warps"],
                                                                 cfg["dw_stages"]),
      interpret=interpret, name="conv_stack_bwd")(
          g.reshape(-1, c2), w2.reshape(9 * c1, c2), y1.reshape(-1, c1), x.reshape(-1, c0))


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7))
def _conv_stack(x, w1, b1, w2, b2, precision="float32", blocks=None, interpret=False):
  return _vjp_fwd(x, w1, b1, w2, b2, precision, blocks, interpret)[0]


def _vjp_fwd(x, w1, b1, w2, b2, precision, blocks, interpret):
  y1 = conv.conv_relu(x, w1, b1, precision=precision, blocks=blocks, interpret=interpret)
  return upper_forward(x, y1, w2, b2, precision, blocks, interpret)[:2]


def upper_forward(x, y1, w2, b2, precision, blocks, interpret, head_w=None):
  """The upper convolution + ReLU + pool on the lower one's output y1 (of input x): (its output,
  the residuals ``grad_parts`` takes, and with ``head_w`` the next dense layer's partial logits
  (``conv_pool.conv_relu_pool_fwd``), else None)."""
  y, arg, *z = conv_pool.forward(y1, w2, b2, precision, blocks, interpret, head_w)
  return y, (x, y1, w2, arg), z[0] if z else None


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
  if g is None:  # The pooled gradient at the chosen positions: the pre-activation gradient.
    n, h, w, _ = y1.shape
    g = max_pool.pool_bwd(dy, arg, (n, h - 2, w - 2, w2.shape[-1]), interpret=interpret,
                          **max_pool.DEFAULT_BLOCKS)
  cfg = conv_pool.backward_config(precision, blocks, y1.shape[-1])
  return backward_parts(g, w2, y1, x, precision=precision, cfg=cfg, interpret=interpret)


def _vjp_bwd(precision, blocks, interpret, res, dy):
  x, y1, w2, _ = res
  dw1, db1, dw2, db2 = grad_parts(res, dy, precision, blocks, interpret)
  # conv1's parts, one a dx program (batch 64: 704), are too many for one chain of adds.
  dw1, db1 = conv.sum_dw_parts(dw1, db1, x.shape[-1], y1.shape[-1], add=common.sum_many_parts)
  dw2, db2 = conv.sum_dw_parts(dw2, db2, y1.shape[-1], w2.shape[-1])
  return jnp.zeros_like(x), dw1, db1, dw2, db2


_conv_stack.defvjp(_vjp_fwd, _vjp_bwd)


def conv_stack(x, w1, b1, w2, b2, *, precision="float32", blocks=None, interpret=False):
  """``max_pool(ReLU(conv(ReLU(conv(x, w1) + b1), w2) + b2))`` through Pallas kernels; x gets
  no gradient (a zero cotangent)."""
  return _conv_stack(x, w1, b1, w2, b2, precision, blocks, interpret)
