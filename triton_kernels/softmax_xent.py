"""Softmax cross-entropy in Triton: the mean over the batch of ``logsumexp(z) - z[label]``; the
twin of ``pallas_kernels.ops.softmax_xent``.

Forward: each program takes BLOCK_M whole rows (the classes padded to a power of two, masked
with -inf) and writes per row the loss, ``log sum exp(z - max z)`` (kept for the backward) and
whether the first argmax is the label. Backward: dz = (softmax(z) - onehot(label)) * g / B.
Everything is taken relative to the row maximum, as in the twin. exp and log are libdevice's
(``__nv_expf``, ``__nv_logf``), as Pallas lowers ``jnp.exp`` and ``jnp.log``: ``tl.exp`` is one
``ex2.approx`` of x log2(e), a few ulps off (docs/design/op_kernels.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

import triton
import triton.language as tl
from triton.language.extra import libdevice
import jax_triton as jt

from pallas_kernels.common import fixed_order_mean
from pallas_kernels.ops.softmax_xent import reference  # noqa: F401 (the twin)

BLOCK_M = 64
NUM_WARPS = 4


@triton.jit
def _rows(z_ptr, labels_ptr, rows, M: tl.constexpr, C: tl.constexpr, C_PAD: tl.constexpr):
  """Logits rows (padded columns -inf, padded rows 0), their labels, and the columns."""
  cols = tl.arange(0, C_PAD)
  ok = (rows[:, None] < M) & (cols[None, :] < C)
  z = tl.load(z_ptr + rows[:, None] * C + cols[None, :], mask=ok, other=0.0)
  z = tl.where(cols[None, :] < C, z, float("-inf"))
  labels = tl.load(labels_ptr + rows, mask=rows < M, other=0)
  return z, labels, cols


@triton.jit
def xent_fwd_kernel(z_ptr, labels_ptr, loss_ptr, logsum_ptr, correct_ptr, M: tl.constexpr,
                    C: tl.constexpr, C_PAD: tl.constexpr, BLOCK_M: tl.constexpr):
  rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
  z, labels, cols = _rows(z_ptr, labels_ptr, rows, M, C, C_PAD)
  shifted = z - tl.max(z, axis=1)[:, None]
  logsum = libdevice.log(tl.sum(libdevice.exp(shifted), axis=1))
  picked = tl.sum(tl.where(cols[None, :] == labels[:, None], shifted, 0.0), axis=1)
  first_max = tl.argmax(z, axis=1, tie_break_left=True)
  tl.store(loss_ptr + rows, logsum - picked, mask=rows < M)
  tl.store(logsum_ptr + rows, logsum, mask=rows < M)
  tl.store(correct_ptr + rows, (first_max == labels).to(tl.int32), mask=rows < M)


@triton.jit
def xent_bwd_kernel(z_ptr, labels_ptr, logsum_ptr, scale_ptr, dz_ptr, M: tl.constexpr,
                    C: tl.constexpr, C_PAD: tl.constexpr, BLOCK_M: tl.constexpr):
  rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
  z, labels, cols = _rows(z_ptr, labels_ptr, rows, M, C, C_PAD)
  logsum = tl.load(logsum_ptr + rows, mask=rows < M, other=0.0)
  p = libdevice.exp((z - tl.max(z, axis=1)[:, None]) - logsum[:, None])
  dz = (p - tl.where(cols[None, :] == labels[:, None], 1.0, 0.0)) * tl.load(scale_ptr)
  tl.store(dz_ptr + rows[:, None] * C + cols[None, :], dz,
           mask=(rows[:, None] < M) & (cols[None, :] < C))


# triton_call wrappers --------------------------------------------------------------------------

def _shapes(logits):
  m, c = logits.shape
  return dict(M=m, C=c, C_PAD=max(16, triton.next_power_of_2(c)), BLOCK_M=BLOCK_M)


def xent_fwd(logits, labels):
  """Per-row loss, log sum exp(z - max z), and correctness (int32 0/1)."""
  m = logits.shape[0]
  return jt.triton_call(
      logits, labels, kernel=xent_fwd_kernel,
      out_shape=[jax.ShapeDtypeStruct((m,), logits.dtype),
                 jax.ShapeDtypeStruct((m,), logits.dtype),
                 jax.ShapeDtypeStruct((m,), jnp.int32)],
      grid=(triton.cdiv(m, BLOCK_M),), num_warps=NUM_WARPS, name="xent_fwd", **_shapes(logits))


def xent_bwd(logits, labels, logsum, scale):
  return jt.triton_call(
      logits, labels, logsum, scale, kernel=xent_bwd_kernel,
      out_shape=jax.ShapeDtypeStruct(logits.shape, logits.dtype),
      grid=(triton.cdiv(logits.shape[0], BLOCK_M),), num_warps=NUM_WARPS, name="xent_bwd",
      **_shapes(logits))


# The differentiable op -------------------------------------------------------------------------

@jax.custom_vjp
def softmax_cross_entropy(logits, labels):
  """``(mean loss, number of correct predictions)`` for integer ``labels`` in [0, C)."""
  loss, _, correct = xent_fwd(logits, labels.astype(jnp.int32))
  return fixed_order_mean(loss), jnp.sum(correct)


def _xent_vjp_fwd(logits, labels):
  labels = labels.astype(jnp.int32)
  loss, logsum, correct = xent_fwd(logits, labels)
  return (fixed_order_mean(loss), jnp.sum(correct)), (logits, labels, logsum)


def _xent_vjp_bwd(res, cotangents):
  logits, labels, logsum = res
  g_loss, _ = cotangents  # The count of correct predictions has no gradient.
  scale = jnp.reshape(g_loss / logits.shape[0], (1,)).astype(logsum.dtype)
  return xent_bwd(logits, labels, logsum, scale), None


softmax_cross_entropy.defvjp(_xent_vjp_fwd, _xent_vjp_bwd)
