"""Hand-written Pallas GPU kernels for jaxshallow's ops, one module per fused op.

Each module holds the kernel(s), ``pallas_call`` wrappers with static block sizes, a
``jax.custom_vjp`` op whose backward also runs Pallas kernels, and the plain-jnp reference.
"""

from __future__ import annotations

from pallas_kernels import autotune, common, conv, dense, dense_xent, max_pool, mse, softmax_xent


def parse_blocks(text: str | None):
  """"BM,BN,BK" -> (("block_m", BM), ("block_n", BN), ("block_k", BK)); None and "auto" pass."""
  if text is None or text == "auto":
    return text
  try:
    bm, bn, bk = (int(v) for v in text.split(","))
  except ValueError:
    raise ValueError(f"blocks must be 'auto' or three integers BM,BN,BK, got {text!r}") from None
  if any(v < 16 or v & (v - 1) for v in (bm, bn, bk)):
    raise ValueError(f"blocks must be powers of two of at least 16, got {text!r}")
  return (("block_m", bm), ("block_n", bn), ("block_k", bk))


def pallas_ops(precision: str = "float32", interpret: bool | None = None,
               blocks: str | None = None):
  """The ``jaxshallow.ops.Ops`` of this package; ``interpret=None`` picks by backend.
  ``blocks`` sets the dense kernels' block sizes (see ``parse_blocks``)."""
  from jaxshallow.ops import Ops
  if interpret is None:
    interpret = common.interpret_default()
  fixed = parse_blocks(blocks)

  def dense_op(x, w, b=None, *, relu=False):
    chosen = fixed
    if fixed == "auto":
      chosen = autotune.lookup(x.shape[0], w.shape[0], w.shape[1], relu, precision)
    return dense.dense(x, w, b, relu, precision, chosen, interpret)

  def head_op(h, w, b, labels):
    if b is None or w.shape[1] > dense_xent.MAX_CLASSES:  # The unfused kernels.
      return softmax_xent.softmax_cross_entropy(dense_op(h, w, b), labels, None, interpret)
    return dense_xent.dense_softmax_cross_entropy(h, w, b, labels, precision, None, interpret)

  return Ops(
      dense=dense_op, dense_softmax_cross_entropy=head_op,
      softmax_cross_entropy=lambda z, y: softmax_xent.softmax_cross_entropy(z, y, None,
                                                                            interpret),
      conv_relu=lambda x, w, b: conv.conv_relu(x, w, b, precision, None, interpret),
      max_pool=lambda x: max_pool.max_pool(x, None, interpret),
      mse=lambda pred, target: mse.mse(pred, target, None, interpret))
