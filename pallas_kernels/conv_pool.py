"""Fused 3x3 valid convolution + bias + ReLU + 2x2 max-pool (stride 2), and its backward.

The CNN's second convolution feeds a max-pool. Run apart, the convolution writes its whole
output (batch 64: 4.7 MB) for the pool to read back, and the backward needs the pool's
backward, then ReLU's gradient, as two more passes over a map of that size. Here:

  forward   a program owns ``block_q`` pooled pixels of one image and all output channels. It
            computes the four convolution outputs under each pooled pixel (four accumulators,
            each the nine taps' products, as ``conv.py`` does), adds the bias, keeps the
            largest, and stores ReLU of it and which of the four positions held it (0..3, the
            first on ties, as XLA), or -1 where the pooled value is not positive: there
            ReLU's gradient is 0 at every position. The convolution's output never reaches
            memory.
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

from pallas_kernels import common, conv, max_pool

# Pooled pixels per program and warps of the forward kernel, for float32 and the tensor-core
# precisions (``conv.units``). Swept on the H100 at the CNN's conv2 (batch 64, a tile per tap):
# 15.6 us float32 (32: 16.5, 64: 28.8), 11.3 us tf32 (16: 12.0, 32: 13.1). ``blocks`` overrides:
# block_q here, num_warps here and in the backward's dw and dx kernels, the rest as
# ``conv.config``.
DEFAULT_BLOCKS = {"float32": dict(block_q=16, num_warps=4),
                  "tensor": dict(block_q=64, num_warps=4)}


def conv_relu_pool_reference(x, w, b):
  """The plain-jnp twin, with exact float32 products."""
  return max_pool.max_pool_reference(conv.conv_relu_reference(x, w, b))


def conv_relu_pool_kernel(x_ref, w_ref, b_ref, y_ref, arg_ref, *, h, w, cin, cout, block_q,
                          precision, wide):
  pw_n = (w - 2) // 2  # Pooled columns; an odd last row or column of the conv is dropped.
  n_pooled = ((h - 2) // 2) * pw_n
  b, q = pl.program_id(0), pl.program_id(1) * block_q + jnp.arange(block_q)
  ok = q < n_pooled
  ph, pw = q // pw_n, q % pw_n
  acc = [jnp.zeros((block_q, conv._pad(cout)), common.acc_dtype(x_ref.dtype))] * 4
  for group in conv._groups(cin, wide):
    w_rows = conv._weight_rows(w_ref, group, cin, cout)  # Once for the four positions.
    for k in range(4):  # Window position (k // 2, k % 2): its conv pixel's tap (0, 0) row.
      corner = b * h * w + (2 * ph + k // 2) * w + 2 * pw + k % 2
      acc[k] += common.dot(conv._input_cols(x_ref, corner, ok, group, w, cin), w_rows,
                           precision)
  co = jnp.arange(conv._pad(cout))
  bias = plgpu.load(b_ref.at[co], mask=co < cout, other=0.0)[None, :]
  best, arg = acc[0] + bias, jnp.zeros(acc[0].shape, jnp.int32)
  for k in range(1, 4):  # The bias first, so that ties are those of the biased values.
    v = acc[k] + bias
    arg = jnp.where(v > best, k, arg)  # Strictly greater: the first maximum wins.
    best = jnp.maximum(best, v)
  row0 = b * n_pooled + pl.program_id(1) * block_q
  common.store_tile(y_ref, row0, 0, jnp.maximum(best, 0.0), row_ok=ok)
  common.store_tile(arg_ref, row0, 0, jnp.where(best > 0, arg, -1), row_ok=ok)


def _config(precision, blocks, cin=None):
  """(forward's block_q and num_warps, ``conv.config`` for the backward kernels)."""
  over = dict(blocks or ())
  bwd = conv.config(precision, [(k, v) for k, v in over.items() if k != "block_q"], cin)
  fwd = dict(DEFAULT_BLOCKS[conv.units(precision)])
  fwd.update({k: over[k] for k in ("block_q", "num_warps") if k in over})
  return fwd, bwd


def conv_relu_pool_fwd(x, w, b, *, precision="float32", block_q=32, num_warps=4, wide=False,
                       interpret=False):
  """Pooled ReLU(conv(x, w) + b), NHWC, and the chosen positions ((B*PH*PW, cout) int32)."""
  (n, h, wd, cin), cout = x.shape, w.shape[-1]
  ph_n, pw_n = (h - 2) // 2, (wd - 2) // 2
  kernel = functools.partial(conv_relu_pool_kernel, h=h, w=wd, cin=cin, cout=cout,
                             block_q=block_q, precision=precision, wide=wide)
  m = n * ph_n * pw_n
  y, arg = pl.pallas_call(
      kernel, out_shape=[jax.ShapeDtypeStruct((m, cout), x.dtype),
                         jax.ShapeDtypeStruct((m, cout), jnp.int32)],
      grid=(n, pl.cdiv(ph_n * pw_n, block_q)),
      compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="conv_relu_pool")(x.reshape(-1, cin), w.reshape(9 * cin, cout), b)
  return y.reshape(n, ph_n, pw_n, cout), arg


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def conv_relu_pool(x, w, b, precision="float32", blocks=None, interpret=False):
  """``max_pool(ReLU(conv3x3_valid(x, w) + b))`` through Pallas kernels, forward and backward."""
  return _vjp_fwd(x, w, b, precision, blocks, interpret)[0]


def _vjp_fwd(x, w, b, precision, blocks, interpret):
  fwd, bwd = _config(precision, blocks)
  y, arg = conv_relu_pool_fwd(x, w, b, precision=precision, wide=bwd["wide"],
                              interpret=interpret, **fwd)
  return y, (x, w, arg)


def weight_grad_parts(x, cout, arg, dy, precision, blocks, interpret, g=None):
  """The backward up to the weights: (g, dw's and db's partial tiles (``conv.dw_layout``), the
  backward's ``conv.config``), g the convolution's pre-activation gradient, for the caller's dx
  (here ``conv_dx``; ``conv_stack`` goes on from g to the layer below). ``g``: already spread
  by the layer above (then dy is not read)."""
  _, cfg = _config(precision, blocks, cin=x.shape[-1])
  n, h, wd, _ = x.shape
  # The pooled gradient at the chosen positions (-1: none) is the conv's pre-activation gradient.
  if g is None:
    g = max_pool.pool_bwd(dy, arg, (n, h - 2, wd - 2, cout), interpret=interpret,
                          **max_pool.DEFAULT_BLOCKS)
  dw_parts, db_parts = conv.conv_dw_parts(
      x, g, precision=precision, wide=cfg["wide"], interpret=interpret, block_p=cfg["dw_p"],
      num_warps=cfg["dw_warps"], num_stages=cfg["dw_stages"], taps=cfg["dw_taps"],
      splits=cfg["splits"])
  return g, dw_parts, db_parts, cfg


def weight_grads(x, cout, arg, dy, precision, blocks, interpret):
  """``weight_grad_parts`` with the partials added up: (g, dw, db, config)."""
  g, dw_parts, db_parts, cfg = weight_grad_parts(x, cout, arg, dy, precision, blocks, interpret)
  return (g, *conv.sum_dw_parts(dw_parts, db_parts, x.shape[-1], cout), cfg)


def _vjp_bwd(precision, blocks, interpret, res, dy):
  x, w, arg = res
  g, dw, db, cfg = weight_grads(x, w.shape[-1], arg, dy, precision, blocks, interpret)
  dx = conv.conv_dx(g, w, x.shape, precision=precision, wide=cfg["wide"], interpret=interpret,
                    block_p=cfg["dx_p"], num_warps=cfg["dx_warps"])
  return dx, dw, db


conv_relu_pool.defvjp(_vjp_fwd, _vjp_bwd)
