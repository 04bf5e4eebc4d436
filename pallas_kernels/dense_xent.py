"""The whole output layer in one kernel: logits, softmax cross-entropy, and all its gradients.

For a classifier's last layer, ``z = h @ w + b`` with few classes (10 fit one tile), one program
per ``block_m`` rows computes, without writing the logits to memory:
  the per-row loss and correctness                          (as ``softmax_xent``)
  dz = (softmax(z) - onehot(label)) / B                     (kept in registers)
  dh = dz @ w^T,  a partial dw = h^T @ dz  and  db = sum(dz)  (partials added up in a fixed
                                                              order, ``common.sum_parts``, if
                                                              the batch spans several programs)
At batch 64 that is one launch where the unfused path takes five (dense forward, loss forward,
loss backward, dx, dw). Gradients are computed eagerly in the custom_vjp's forward rule, so the
backward only scales them by the incoming cotangent (1.0 in training; XLA folds the product).
Without differentiation (evaluation) the gradient half is skipped.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common
from pallas_kernels.dense import dense_reference
from pallas_kernels.softmax_xent import (row_stats, softmax_cross_entropy_reference,
                                         softmax_minus_onehot)

# 16x128 measured fastest for the MLP at batch 64 on the H200 (docs/PERFORMANCE.md): four
# programs share the batch, and K=256 takes two steps.
DEFAULT_BLOCKS = dict(block_m=16, block_k=128)
MAX_CLASSES = 128  # Beyond this the logits tile no longer fits registers: use the unfused ops.


def reference(h, w, b, labels):
  """The plain-jnp twin: ``softmax_cross_entropy(h @ w + b, labels)``."""
  return softmax_cross_entropy_reference(dense_reference(h, w, b), labels)


def head_kernel(h_ref, w_ref, b_ref, labels_ref, loss_ref, correct_ref, *grad_refs, n_classes,
                block_m, block_k, precision):
  m, k = h_ref.shape
  c_pad = max(16, pl.next_power_of_2(n_classes))
  i = pl.program_id(0)
  m0 = i * block_m
  rows, cols = m0 + jnp.arange(block_m), jnp.arange(c_pad)
  row_ok = rows < m
  n_k = pl.cdiv(k, block_k)

  def logits_body(kk, acc):
    h = common.load_tile(h_ref, m0, kk * block_k, block_m, block_k)
    return acc + common.dot(h, common.load_tile(w_ref, kk * block_k, 0, block_k, c_pad),
                            precision)

  z = lax.fori_loop(0, n_k, logits_body, jnp.zeros((block_m, c_pad), common.acc_dtype(
      h_ref.dtype)))
  z += plgpu.load(b_ref.at[cols], mask=cols < n_classes, other=0.0)[None, :]
  z = jnp.where(cols[None, :] < n_classes, z, -jnp.inf)
  labels = common.load_vec(labels_ref, m0, block_m, other=0)
  logsum, loss, correct = row_stats(z, labels, cols)
  common.store_vec(loss_ref, m0, loss)
  common.store_vec(correct_ref, m0, correct)
  if not grad_refs:
    return
  dh_ref, dw_ref, db_ref = grad_refs
  dz = jnp.where(row_ok[:, None] & (cols[None, :] < n_classes),
                 softmax_minus_onehot(z, labels, cols, logsum) / m, 0.0)
  common.store_tile(db_ref, i, 0, jnp.sum(dz, axis=0)[None, :])

  @pl.loop(0, n_k)
  def _(kk):
    k0 = kk * block_k
    h = common.load_tile(h_ref, m0, k0, block_m, block_k)
    w = common.load_tile(w_ref, k0, 0, block_k, c_pad)
    common.store_tile(dh_ref, m0, k0, common.dot(dz, w, precision, trans_b=True))
    # This program's partial dw: rows i*k + k0 ... of the (programs * k, c_pad) partials.
    common.store_tile(dw_ref, i * k + k0, 0, common.dot(h, dz, precision, trans_a=True),
                      row_ok=k0 + jnp.arange(block_k) < k)


def head_call(h, w, b, labels, *, with_grads, precision="float32", block_m=16, block_k=128,
              num_warps=4, interpret=False):
  (m, k), n = h.shape, w.shape[1]
  c_pad = max(16, pl.next_power_of_2(n))
  programs = pl.cdiv(m, block_m)
  out_shape = [jax.ShapeDtypeStruct((m,), common.acc_dtype(h.dtype)),
               jax.ShapeDtypeStruct((m,), jnp.int32)]
  if with_grads:
    out_shape += [jax.ShapeDtypeStruct((m, k), h.dtype),
                  jax.ShapeDtypeStruct((programs * k, c_pad), h.dtype),
                  jax.ShapeDtypeStruct((programs, c_pad), h.dtype)]
  kernel = functools.partial(head_kernel, n_classes=n, block_m=block_m, block_k=block_k,
                             precision=precision)
  outs = pl.pallas_call(
      kernel, out_shape=out_shape, grid=(programs,),
      compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="dense_xent")(h, w, b, labels.astype(jnp.int32))
  if not with_grads:
    return outs
  loss, correct, dh, dw_parts, db_parts = outs
  dw = dw_parts.reshape(programs, k, c_pad)[:, :, :n]
  db = db_parts[:, :n]
  if programs > 1:
    dw, db = common.sum_parts(dw), common.sum_parts(db)
  else:  # One program: nothing to add up (a reshape, no kernel).
    dw, db = dw.reshape(k, n), db.reshape(n)
  return loss, correct, dh, dw, db


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def dense_softmax_cross_entropy(h, w, b, labels, precision="float32", blocks=None,
                                interpret=False):
  """``softmax_cross_entropy(h @ w + b, labels)`` -> (mean loss, number correct), fused."""
  loss, correct = head_call(h, w, b, labels, with_grads=False, precision=precision,
                            interpret=interpret, **common.blocks(DEFAULT_BLOCKS, blocks))
  return jnp.mean(loss), jnp.sum(correct)


def _vjp_fwd(h, w, b, labels, precision, blocks, interpret):
  loss, correct, dh, dw, db = head_call(h, w, b, labels, with_grads=True, precision=precision,
                                        interpret=interpret,
                                        **common.blocks(DEFAULT_BLOCKS, blocks))
  return (jnp.mean(loss), jnp.sum(correct)), (dh, dw, db)


def _vjp_bwd(precision, blocks, interpret, res, cotangents):
  g, _ = cotangents  # The count of correct predictions has no gradient.
  dh, dw, db = res
  return g * dh, g * dw, g * db, None


dense_softmax_cross_entropy.defvjp(_vjp_fwd, _vjp_bwd)
