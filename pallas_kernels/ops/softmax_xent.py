"""Softmax cross-entropy: mean over the batch of ``logsumexp(z) - z[label]``.

Forward: one kernel; each program takes ``block_m`` whole rows (the class dimension padded to a
power of two and masked with -inf), and writes per row the loss, ``log sum exp(z - max z)`` (kept
for the backward) and whether the prediction (first argmax, as ``jnp.argmax``) is right, so
accuracy needs no second pass over the logits.

Backward: one kernel writes ``dz = (softmax(z) - onehot(label)) * g / B`` directly.

Precision: everything is computed relative to the row maximum, ``(z - max z)`` first: that
difference is exact for the logits that carry the probability, where ``z - logsumexp(z)`` would
inherit the rounding of a large log-sum-exp (about 1e-3 at |z| ~ 1e4 in float32).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels import common


def reference(logits, labels):
  """The plain-jnp twin: (mean loss, number of rows whose argmax is the label)."""
  logz = jax.nn.logsumexp(logits, axis=-1)
  picked = jnp.take_along_axis(logits, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
  return jnp.mean(logz - picked), jnp.sum(jnp.argmax(logits, axis=-1) == labels)

DEFAULT_BLOCKS = dict(block_m=64)


def _load_rows(z_ref, labels_ref, m0, block_m):
  """Logits rows ``m0:m0+block_m`` (padded columns -inf, padded rows 0), labels, and masks."""
  m, c = z_ref.shape
  rows, cols = m0 + jnp.arange(block_m), jnp.arange(pl.next_power_of_2(c))
  row_ok = rows < m
  z = common.load_tile(z_ref, m0, 0, block_m, cols.shape[0]).astype(common.acc_dtype(z_ref.dtype))
  z = jnp.where(cols[None, :] < c, z, -jnp.inf)
  labels = common.load_vec(labels_ref, m0, block_m, other=0)
  return z, labels, cols, row_ok


def row_stats(z, labels, cols):
  """Per row of a logits tile (padded columns -inf): ``log sum exp(z - max z)``, the loss, and
  whether the first argmax is the label. Shared with the fused output-layer kernel."""
  zmax = jnp.max(z, axis=1)
  logsum = jnp.log(jnp.sum(jnp.exp(z - zmax[:, None]), axis=1))
  picked = jnp.sum(jnp.where(cols[None, :] == labels[:, None], z - zmax[:, None], 0.0), axis=1)
  first_max = jnp.min(jnp.where(z == zmax[:, None], cols[None, :], cols.shape[0]), axis=1)
  return logsum, logsum - picked, (first_max == labels).astype(jnp.int32)


def softmax_minus_onehot(z, labels, cols, logsum):
  return (jnp.exp((z - jnp.max(z, axis=1)[:, None]) - logsum[:, None])
          - jnp.where(cols[None, :] == labels[:, None], 1.0, 0.0))


def xent_fwd_kernel(z_ref, labels_ref, loss_ref, logsum_ref, correct_ref, *, block_m):
  m0 = pl.program_id(0) * block_m
  z, labels, cols, row_ok = _load_rows(z_ref, labels_ref, m0, block_m)
  logsum, loss, correct = row_stats(z, labels, cols)
  common.store_vec(loss_ref, m0, loss)
  common.store_vec(logsum_ref, m0, logsum)
  common.store_vec(correct_ref, m0, correct)


def xent_bwd_kernel(z_ref, labels_ref, logsum_ref, scale_ref, dz_ref, *, block_m):
  m0 = pl.program_id(0) * block_m
  z, labels, cols, row_ok = _load_rows(z_ref, labels_ref, m0, block_m)
  logsum = common.load_vec(logsum_ref, m0, block_m)
  dz = softmax_minus_onehot(z, labels, cols, logsum) * scale_ref[...]
  common.store_tile(dz_ref, m0, 0, dz)


# pallas_call wrappers --------------------------------------------------------------------------

def xent_fwd(logits, labels, *, block_m=64, num_warps=4, interpret=False):
  """Per-row loss, log sum exp(z - max z), and correctness (int32 0/1)."""
  m, dtype = logits.shape[0], common.acc_dtype(logits.dtype)
  return pl.pallas_call(
      functools.partial(xent_fwd_kernel, block_m=block_m),
      out_shape=[jax.ShapeDtypeStruct((m,), dtype), jax.ShapeDtypeStruct((m,), dtype),
                 jax.ShapeDtypeStruct((m,), jnp.int32)],
      grid=(pl.cdiv(m, block_m),), compiler_params=common.compiler_params(num_warps, 1),
      interpret=interpret, name="xent_fwd")(logits, labels)


def xent_bwd(logits, labels, logsum, scale, *, block_m=64, num_warps=4, interpret=False):
  m = logits.shape[0]
  return pl.pallas_call(
      functools.partial(xent_bwd_kernel, block_m=block_m),
      out_shape=jax.ShapeDtypeStruct(logits.shape, logits.dtype),
      grid=(pl.cdiv(m, block_m),), compiler_params=common.compiler_params(num_warps, 1),
      interpret=interpret, name="xent_bwd")(logits, labels, logsum, scale)


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _softmax_cross_entropy(logits, labels, blocks=None, interpret=False):
  loss, _, correct = xent_fwd(logits, labels.astype(jnp.int32), interpret=interpret,
                              **common.blocks(DEFAULT_BLOCKS, blocks))
  return common.fixed_order_mean(loss), jnp.sum(correct)


def _xent_vjp_fwd(logits, labels, blocks, interpret):
  labels = labels.astype(jnp.int32)
  loss, logsum, correct = xent_fwd(logits, labels, interpret=interpret,
                                   **common.blocks(DEFAULT_BLOCKS, blocks))
  return (common.fixed_order_mean(loss), jnp.sum(correct)), (logits, labels, logsum)


def _xent_vjp_bwd(blocks, interpret, res, cotangents):
  logits, labels, logsum = res
  g_loss, _ = cotangents  # The count of correct predictions has no gradient.
  scale = (g_loss / logits.shape[0]).astype(logsum.dtype)
  dz = xent_bwd(logits, labels, logsum, scale, interpret=interpret,
                **common.blocks(DEFAULT_BLOCKS, blocks))
  return dz, None


_softmax_cross_entropy.defvjp(_xent_vjp_fwd, _xent_vjp_bwd)


def softmax_cross_entropy(logits, labels, *, blocks=None, interpret=False):
  """``(mean loss, number of correct predictions)`` for integer ``labels`` in [0, C)."""
  return _softmax_cross_entropy(logits, labels, blocks, interpret)
