"""The small set of ops every model is written against, one implementation per ``impl``.

Models call ``ops.dense`` and ``ops.softmax_cross_entropy`` and never jnp matmuls directly, so the
Pallas kernels slot in without touching model code.

Precision modes, for the matrix products only (everything else stays float32):
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

IMPLS = ("xla", "pallas", "numpy")
PRECISIONS = ("float32", "tf32", "bfloat16")


class Ops(NamedTuple):
  dense: Callable  # (x, w, b | None, *, relu: bool) -> x @ w + b, then ReLU if asked
  # (logits, int labels) -> (mean loss over the batch, number of correct argmax predictions)
  softmax_cross_entropy: Callable


def matmul(a, b, precision: str = "float32"):
  """``a @ b`` in the given precision mode; bfloat16 operands accumulate in float32, other
  modes keep the inputs' dtype (float64 stays float64 for the reference tests)."""
  if precision == "bfloat16":
    return jnp.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16),
                   preferred_element_type=jnp.float32)
  p = lax.Precision.HIGHEST if precision == "float32" else lax.Precision.DEFAULT
  return jnp.dot(a, b, precision=p)


def dense(x, w, b=None, *, relu: bool = False, precision: str = "float32"):
  y = matmul(x, w, precision)
  if b is not None:
    y = y + b
  return jnp.maximum(y, 0) if relu else y


def softmax_cross_entropy(logits, labels):
  """Mean of ``logsumexp(z) - z[label]`` (max-shifted, so finite for logits of any size) and the
  number of rows whose argmax is the label."""
  logz = jax.nn.logsumexp(logits, axis=-1)
  picked = jnp.take_along_axis(logits, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
  return jnp.mean(logz - picked), jnp.sum(jnp.argmax(logits, axis=-1) == labels)


def get_ops(impl: str = "xla", precision: str = "float32") -> Ops:
  if precision not in PRECISIONS:
    raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
  if impl == "xla":
    return Ops(functools.partial(dense, precision=precision), softmax_cross_entropy)
  if impl == "pallas":
    from pallas_kernels import pallas_ops  # Imported lazily: pulls in Pallas.
    return pallas_ops(precision)
  raise ValueError(f"no JAX ops for impl {impl!r}; choose xla or pallas (numpy has its own module)")
