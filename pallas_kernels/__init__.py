"""Hand-written Pallas GPU kernels for jaxshallow's ops, one module per fused op.

Each module holds the kernel(s), ``pallas_call`` wrappers with static block sizes, a
``jax.custom_vjp`` op whose backward also runs Pallas kernels, and the plain-jnp reference.
"""

from __future__ import annotations

from pallas_kernels import common, conv, dense, max_pool, mse, softmax_xent


def pallas_ops(precision: str = "float32", interpret: bool | None = None):
  """The ``jaxshallow.ops.Ops`` of this package; ``interpret=None`` picks by backend."""
  from jaxshallow.ops import Ops
  if interpret is None:
    interpret = common.interpret_default()
  return Ops(
      dense=lambda x, w, b=None, *, relu=False: dense.dense(x, w, b, relu, precision, None,
                                                            interpret),
      softmax_cross_entropy=lambda z, y: softmax_xent.softmax_cross_entropy(z, y, None,
                                                                            interpret),
      conv_relu=lambda x, w, b: conv.conv_relu(x, w, b, precision, None, interpret),
      max_pool=lambda x: max_pool.max_pool(x, None, interpret),
      mse=lambda pred, target: mse.mse(pred, target, None, interpret))
