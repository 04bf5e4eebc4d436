"""Hand-written Pallas GPU kernels for jaxshallow's ops, one module per fused op.

Each module holds the kernel(s), ``pallas_call`` wrappers with static block sizes, a
``jax.custom_vjp`` op whose backward also runs Pallas kernels, and its plain-jnp reference.
The package stands on its own: it imports jax, never the library that uses it
(``jaxshallow.ops.pallas_ops`` wires these ops into the models).
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
