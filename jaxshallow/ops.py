"""The small set of ops every model is written against, one implementation per ``impl``.

Models call ``ops.dense``, ``ops.conv_relu``, ``ops.max_pool``, ``ops.conv_relu_pool``,
``ops.conv_stack``, ``ops.softmax_cross_entropy`` and ``ops.mse``, never jnp products directly,
so the Pallas kernels slot in without touching model code. Images are NHWC, convolution weights
HWIO.

Precision modes, for the matrix products and convolutions only (everything else stays float32):
  float32   exact float32 products (``Precision.HIGHEST``; on GPUs XLA's default would use TF32)
  tf32      float32 storage, TF32 tensor-core products (10-bit mantissa)
  bfloat16  operands rounded to bfloat16, products accumulated in float32
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

IMPLS = ("xla", "pallas", "triton", "numpy")
PRECISIONS = ("float32", "tf32", "bfloat16")


class Ops(NamedTuple):
  dense: Callable  # (x, w, b | None, *, relu: bool) -> x @ w + b, then ReLU if asked
  # (logits, int labels) -> (mean loss over the batch, number of correct argmax predictions)
  softmax_cross_entropy: Callable
  conv_relu: Callable  # (x NHWC, w HWIO, b) -> ReLU(valid 3x3 convolution + b)
  max_pool: Callable  # (x NHWC) -> 2x2 max-pool with stride 2 (odd edges dropped)
  mse: Callable  # (predictions (B,), targets (B,)) -> mean squared error
  # (h, w, b, int labels) -> softmax_cross_entropy(dense(h, w, b), labels): a classifier's whole
  # output layer with its loss, which the Pallas impl runs as one fused kernel.
  dense_softmax_cross_entropy: Callable
  # (x NHWC, w HWIO, b) -> max_pool(conv_relu(x, w, b)), which the Pallas impl runs as one kernel
  # (the convolution's output never reaches memory).
  conv_relu_pool: Callable
  # (x NHWC, w1, b1, w2, b2) -> conv_relu_pool(conv_relu(x, w1, b1), w2, b2) with x as data (no
  # gradient): the CNN's features. The Pallas impl computes the lower dw inside the kernel of
  # the upper dx, so that dx never reaches memory.
  conv_stack: Callable


def _product_args(precision: str, *operands):
  """Operands and keyword arguments for a product in the given precision mode. bfloat16
  operands accumulate in float32; other modes keep the inputs' dtype (float64 stays float64)."""
  if precision == "bfloat16":
    return [o.astype(jnp.bfloat16) for o in operands], {"preferred_element_type": jnp.float32}
  p = lax.Precision.HIGHEST if precision == "float32" else lax.Precision.DEFAULT
  return list(operands), {"precision": p}


def matmul(a, b, precision: str = "float32"):
  (a, b), kw = _product_args(precision, a, b)
  return jnp.dot(a, b, **kw)


def dense(x, w, b=None, *, relu: bool = False, precision: str = "float32"):
  y = matmul(x, w, precision)
  if b is not None:
    y = y + b
  return jax.nn.relu(y) if relu else y


def _conv(x, w, **kw):
  return lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                  dimension_numbers=("NHWC", "HWIO", "NHWC"), **kw)


# XLA's CPU backend leaves the gradients' convolutions of lax's transpose rules in layouts its
# fast convolution does not take when they run in a loop body, as in the epoch's lax.scan
# (jax-ml/jax#12868): a CNN step took 1.3 s there against 0.1 s alone. Written out as forward
# convolutions in NHWC/HWIO they run at the fast one's speed (two steps of the CNN's convolutions
# 0.06 s against 3.1, the same sums within float32 rounding). On the CPU backend only, so that the
# GPU's program stays lax's own (its StableHLO unchanged).
@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _conv_cpu(x, w, precision):
  return _conv(x, w, precision=precision)


def _conv_cpu_fwd(x, w, precision):
  return _conv(x, w, precision=precision), (x, w)


def _conv_cpu_bwd(precision, res, g):
  x, w = res
  kh, kw = w.shape[:2]
  # dx: g padded by the kernel's size less one, against the kernel flipped, its channels swapped.
  g_full = jnp.pad(g, ((0, 0), (kh - 1, kh - 1), (kw - 1, kw - 1), (0, 0)))
  dx = _conv(g_full, jnp.flip(w, (0, 1)).transpose(0, 1, 3, 2), precision=precision)
  # dw: the batch as the summed channel, x as (C_in, H, W, B) against g as (H', W', B, C_out).
  dw = _conv(x.transpose(3, 1, 2, 0), g.transpose(1, 2, 0, 3), precision=precision)
  return dx, dw.transpose(1, 2, 0, 3)


_conv_cpu.defvjp(_conv_cpu_fwd, _conv_cpu_bwd)


def conv_relu(x, w, b, *, precision: str = "float32"):
  (x, w), kw = _product_args(precision, x, w)
  if precision != "bfloat16" and jax.default_backend() == "cpu":  # (bfloat16: mixed dtypes)
    y = _conv_cpu(x, w, kw["precision"])
  else:
    y = _conv(x, w, **kw)
  # jax.nn.relu, not jnp.maximum(., 0): at exactly 0 its gradient is 0, as in the Pallas and NumPy
  # backward passes, where jnp.maximum's is 1/2. A zero bias on a blank 3x3 patch gives exact 0s.
  return jax.nn.relu(y + b)


def max_pool(x):
  return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def conv_relu_pool(x, w, b, *, precision: str = "float32"):
  return max_pool(conv_relu(x, w, b, precision=precision))


def conv_stack(x, w1, b1, w2, b2, *, precision: str = "float32"):
  x = lax.stop_gradient(x)
  return conv_relu_pool(conv_relu(x, w1, b1, precision=precision), w2, b2, precision=precision)


def softmax_cross_entropy(logits, labels):
  """Mean of ``logsumexp(z) - z[label]`` (max-shifted, so finite for logits of any size) and the
  number of rows whose argmax is the label."""
  logz = jax.nn.logsumexp(logits, axis=-1)
  picked = jnp.take_along_axis(logits, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
  return jnp.mean(logz - picked), jnp.sum(jnp.argmax(logits, axis=-1) == labels)


def mse(pred, target):
  return jnp.mean(jnp.square(pred - target))


def dense_softmax_cross_entropy(h, w, b, labels, *, precision: str = "float32"):
  return softmax_cross_entropy(dense(h, w, b, precision=precision), labels)


def parse_blocks(text: str | None):
  """``--blocks`` as the Pallas dense kernels take it: "BM,BN,BK" -> (("block_m", BM),
  ("block_n", BN), ("block_k", BK)); None and "auto" pass. ValueError (one line) otherwise."""
  if text is None or text == "auto":
    return text
  try:
    bm, bn, bk = (int(v) for v in text.split(","))
  except ValueError:
    raise ValueError(f"blocks must be 'auto' or three integers BM,BN,BK, got {text!r}") from None
  if any(v < 16 or v & (v - 1) for v in (bm, bn, bk)):
    raise ValueError(f"blocks must be powers of two of at least 16, got {text!r}")
  return (("block_m", bm), ("block_n", bn), ("block_k", bk))


def get_ops(impl: str = "xla", precision: str = "float32", blocks: str | None = None) -> Ops:
  """The ops of ``impl``. ``blocks`` applies to Pallas dense kernels: None for the defaults,
  "BM,BN,BK" for fixed sizes, or "auto" for the sizes ``pallas_kernels.autotune`` chose."""
  if precision not in PRECISIONS:
    raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
  if impl == "xla":
    return Ops(functools.partial(dense, precision=precision), softmax_cross_entropy,
               functools.partial(conv_relu, precision=precision), max_pool, mse,
               functools.partial(dense_softmax_cross_entropy, precision=precision),
               functools.partial(conv_relu_pool, precision=precision),
               functools.partial(conv_stack, precision=precision))
  if impl == "pallas":
    return pallas_ops(precision, blocks=blocks)
  if impl == "triton":
    return triton_ops(precision)
  raise ValueError(f"no JAX ops for impl {impl!r}; choose xla, pallas or triton (numpy has its "
                   f"own module)")


def triton_ops(precision: str = "float32") -> Ops:
  """The ops of ``triton_kernels`` (raw Triton through jax-triton; GPU only): the MLP family's
  dense layers and softmax cross-entropy. The MSE head stays plain jnp (XLA fuses it into the
  step); the convolutions have no Triton twin, so the CNN cannot take this impl."""
  from triton_kernels import dense as dense_k, softmax_xent  # jax-triton is optional

  def no_conv(*args):
    raise ValueError("impl='triton' covers the MLP family (dense layers), not convolutions")

  def dense_op(x, w, b=None, *, relu=False):
    return dense_k.dense(x, w, b, relu=relu, precision=precision)

  def head_op(h, w, b, labels):
    return softmax_xent.softmax_cross_entropy(dense_op(h, w, b), labels)

  return Ops(dense=dense_op, softmax_cross_entropy=softmax_xent.softmax_cross_entropy,
             conv_relu=no_conv, max_pool=no_conv, mse=mse, dense_softmax_cross_entropy=head_op,
             conv_relu_pool=no_conv, conv_stack=no_conv)


def pallas_ops(precision: str = "float32", interpret: bool | None = None,
               blocks: str | None = None) -> Ops:
  """The ops of ``pallas_kernels``; ``interpret=None`` compiles on GPUs and interprets
  elsewhere. ``blocks`` sets the dense kernels' block sizes (``parse_blocks``)."""
  # Imported here: Pallas is needed only by this impl.
  from pallas_kernels import autotune, common
  from pallas_kernels.ops import (conv, conv_pool, conv_stack, dense as dense_k, dense_xent,
                                  max_pool as pool_k, mse as mse_k, softmax_xent)
  if interpret is None:
    interpret = common.interpret_default()
  fixed = parse_blocks(blocks)

  def dense_op(x, w, b=None, *, relu=False):
    chosen = fixed
    if fixed == "auto":
      chosen = autotune.lookup(x.shape[0], w.shape[0], w.shape[1], relu, precision)
    hopper = dense_on_hopper(x.shape[0], w.shape[0], w.shape[1], precision, chosen, False,
                             interpret)
    return dense_k.dense(x, w, b, relu=relu, precision=precision, blocks=chosen,
                         interpret=interpret, hopper=hopper)

  def xent_op(z, y):
    return softmax_xent.softmax_cross_entropy(z, y, interpret=interpret)

  def head_op(h, w, b, labels):
    if not fused_head(w.shape[1], b is not None):  # The unfused kernels.
      return xent_op(dense_op(h, w, b), labels)
    return dense_xent.dense_softmax_cross_entropy(h, w, b, labels, precision=precision,
                                                  interpret=interpret)

  return Ops(dense=dense_op, softmax_cross_entropy=xent_op,
             conv_relu=lambda x, w, b: conv.conv_relu(x, w, b, precision=precision,
                                                      interpret=interpret),
             max_pool=lambda x: pool_k.max_pool(x, interpret=interpret),
             mse=lambda pred, target: mse_k.mse(pred, target, interpret=interpret),
             dense_softmax_cross_entropy=head_op,
             conv_relu_pool=lambda x, w, b: conv_pool.conv_relu_pool(
                 x, w, b, precision=precision, interpret=interpret),
             conv_stack=lambda x, w1, b1, w2, b2: conv_stack.conv_stack(
                 x, w1, b1, w2, b2, precision=precision, interpret=interpret))


# From this many rows the dense layer's forward and dW ran faster as Hopper wgmma tiles
# (tf32, and float32 as 3xTF32) than as the Triton-lowered kernels (docs/design/op_kernels.md).
HOPPER_DENSE_FROM_ROWS = 4096


def dense_on_hopper(m: int, k: int, n: int, precision: str, blocks, w_transposed: bool,
                    interpret: bool) -> bool:
  """Whether a dense layer of these sizes runs as ``dense_mgpu``'s wgmma products: tf32 or
  float32, from ``HOPPER_DENSE_FROM_ROWS`` rows, on a Hopper GPU, unless block sizes are forced.
  In interpret mode the CPU runs the same path around the kernel's jnp twin (for the tests)."""
  from pallas_kernels.ops import dense_mgpu
  return (precision in ("tf32", "float32") and m >= HOPPER_DENSE_FROM_ROWS and not blocks
          and not w_transposed and dense_mgpu.fits(m, k, n)
          and (interpret or dense_mgpu.on_hopper()))


def fused_head(n_classes: int, has_bias: bool) -> bool:
  """Whether a classifier's output layer and loss run as one kernel (``dense_xent``), or as
  the dense and softmax kernels apart (no bias, or more classes than its tile holds)."""
  from pallas_kernels.ops import dense_xent
  return has_bias and n_classes <= dense_xent.MAX_CLASSES
