"""Hand-written Pallas GPU kernels for jaxshallow's ops, one module per fused op.

Each module holds the kernel(s), a ``pallas_call`` wrapper with static block sizes, a
``jax.custom_vjp`` op whose backward also runs Pallas kernels, and the plain-jnp reference.
"""

from __future__ import annotations

from pallas_kernels import common, dense, softmax_xent


def pallas_ops(precision: str = "float32", interpret: bool | None = None):
  """The ``jaxshallow.ops.Ops`` of this package; ``interpret=None`` picks by backend."""
  from jaxshallow.ops import Ops
  if interpret is None:
    interpret = common.interpret_default()

  def dense_op(x, w, b=None, *, relu=False):
    return dense.dense(x, w, b, relu, precision, None, interpret)

  def xent_op(logits, labels):
    return softmax_xent.softmax_cross_entropy(logits, labels, None, interpret)

  return Ops(dense_op, xent_op)
