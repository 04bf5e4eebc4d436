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

Split K. With a long K and a small batch, as the CNN's head (K = 4608, batch 64), a few programs
would each walk the whole of K twice, and the GPU would mostly idle. From ``SPLIT_K_MIN`` on,
K is cut into slices of ``split`` columns, a program per (row block, slice), in two launches:
  logits_part_kernel   the slice's partial logits h[:, slice] @ w[slice]
  split_grads_kernel   the logits summed over the slices in a fixed order (every program of a
                       row block computes the same bits), loss and dz as above, then the
                       slice's dh and its (row block's partial) dw
The kernel that wrote h may have computed the partial logits already (``conv_pool``'s
``head_w``): given as ``logits_parts``, the first launch is skipped.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common
from pallas_kernels.ops import dense, max_pool, softmax_xent
from pallas_kernels.ops.softmax_xent import row_stats, softmax_minus_onehot

# 16x128 measured fastest for the MLP at batch 64 (docs/design/op_kernels.md): four programs
# share the batch, and K=256 takes two steps. From LARGE_ROWS rows on, 64-row blocks: 16-row ones
# leave 512 partial dw tiles at batch 8192, whose sum took longer than the kernel.
DEFAULT_BLOCKS = dict(block_m=16, block_k=128)
LARGE_ROWS = 4096
LARGE_BLOCKS = dict(block_m=64, block_k=64)
MAX_CLASSES = 128  # Beyond this the logits tile no longer fits registers: use the unfused ops.
SPLIT_K_MIN = 2048  # From this K on, the gradient pass splits K across programs.
# 128-column K blocks measured faster than 64 for the CNN's head with the pool's spread, alone
# and in the CNN's step (partial logits given) (docs/design/op_kernels.md).
SPLIT_BLOCKS = dict(block_m=32, block_k=128, split=128)
# Up to this many K slices the gradient pass adds the partial logits in an unrolled chain, its
# loads in flight together (faster than a loop for the CNN's head's 36 slices, the same bits);
# beyond, in a loop.
UNROLL_SLICES = 64


def reference(h, w, b, labels):
  """The plain-jnp twin: ``softmax_cross_entropy(h @ w + b, labels)``."""
  return softmax_xent.reference(dense.reference(h, w, b), labels)


def _loss_and_dz(z, b_ref, labels_ref, loss_ref, correct_ref, i, m, block_m, n_classes,
                 with_grads=True, store=True):
  """Given row block i's logits before the bias: store (if ``store``) each row's loss and
  correctness, and return dz = dloss/dz (zero in padded rows and columns), or None without
  gradients."""
  m0, cols = i * block_m, jnp.arange(z.shape[1])
  z += plgpu.load(b_ref.at[cols], mask=cols < n_classes, other=0.0)[None, :]
  z = jnp.where(cols[None, :] < n_classes, z, -jnp.inf)
  labels = common.load_vec(labels_ref, m0, block_m, other=0)
  logsum, loss, correct = row_stats(z, labels, cols)
  store = jnp.full((block_m,), store)
  common.store_vec(loss_ref, m0, loss, ok=store)
  common.store_vec(correct_ref, m0, correct, ok=store)
  if not with_grads:
    return None
  row_ok = m0 + jnp.arange(block_m) < m
  return jnp.where(row_ok[:, None] & (cols[None, :] < n_classes),
                   softmax_minus_onehot(z, labels, cols, logsum) / m, 0.0)


def _logits(h_ref, w_ref, m0, k0, n_k, block_m, block_k, c_pad, precision):
  """h[rows m0.., cols k0 .. k0 + n_k * block_k] @ w[those rows] (loads past K read zeros)."""
  def body(kk, acc):
    kc = k0 + kk * block_k
    h = common.load_tile(h_ref, m0, kc, block_m, block_k)
    return acc + common.dot(h, common.load_tile(w_ref, kc, 0, block_k, c_pad), precision)
  return lax.fori_loop(0, n_k, body, jnp.zeros((block_m, c_pad), common.acc_dtype(h_ref.dtype)))


def _grads(h_ref, w_ref, dz, dh_ref, dw_ref, i, m0, k0, n_k, block_m, block_k, precision,
           arg_ref=None, pool=None):
  """For K columns k0 .. k0 + n_k * block_k: dh = dz @ w^T, and row block i's partial
  dw = h^T @ dz at rows i * K + ... of the (row blocks * K, c_pad) partials. With ``pool``
  (h is a max-pool's flattened output): dh spread to the pool's input instead
  (``max_pool.spread_tile``)."""
  k, c_pad = h_ref.shape[1], dz.shape[1]

  @pl.loop(0, n_k)
  def _(kk):
    kc = k0 + kk * block_k
    h = common.load_tile(h_ref, m0, kc, block_m, block_k)
    w = common.load_tile(w_ref, kc, 0, block_k, c_pad)
    dh = common.dot(dz, w, precision, trans_b=True)
    if pool:
      max_pool.spread_tile(dh_ref, arg_ref, m0, kc, dh, **dict(pool))
    else:
      common.store_tile(dh_ref, m0, kc, dh)
    common.store_tile(dw_ref, i * k + kc, 0, common.dot(h, dz, precision, trans_a=True),
                      row_ok=kc + jnp.arange(block_k) < k)


def _pool_refs(refs, pool):
  """(the pool's chosen positions or None, the other refs): with ``pool`` the first of refs."""
  return (refs[0], refs[1:]) if pool else (None, refs)


def head_kernel(h_ref, w_ref, b_ref, labels_ref, *refs, n_classes, block_m, block_k, precision,
                pool=None):
  arg_ref, (loss_ref, correct_ref, *grad_refs) = _pool_refs(refs, pool)
  m, k = h_ref.shape
  c_pad = common.tile_side(n_classes)
  i = pl.program_id(0)
  m0 = i * block_m
  n_k = pl.cdiv(k, block_k)
  z = _logits(h_ref, w_ref, m0, 0, n_k, block_m, block_k, c_pad, precision)
  dz = _loss_and_dz(z, b_ref, labels_ref, loss_ref, correct_ref, i, m, block_m, n_classes,
                    with_grads=bool(grad_refs))
  if not grad_refs:
    return
  dh_ref, dw_ref, db_ref = grad_refs
  common.store_tile(db_ref, i, 0, jnp.sum(dz, axis=0)[None, :])
  _grads(h_ref, w_ref, dz, dh_ref, dw_ref, i, m0, 0, n_k, block_m, block_k, precision,
         arg_ref, pool)


def logits_part_kernel(h_ref, w_ref, z_ref, *, block_m, block_k, split, m_pad, precision):
  """Split K: program (i, s) stores h[rows i, slice s] @ w[slice s] at rows s * m_pad + ..."""
  i, s = pl.program_id(0), pl.program_id(1)
  z = _logits(h_ref, w_ref, i * block_m, s * split, split // block_k, block_m, block_k,
              z_ref.shape[1], precision)
  common.store_tile(z_ref, s * m_pad + i * block_m, 0, z)


def split_grads_kernel(h_ref, w_ref, b_ref, labels_ref, z_ref, *refs, n_classes, block_m,
                       block_k, split, z_rows, precision, pool=None):
  """Split K: program (i, s) sums row block i's partial logits (z: one part every ``z_rows``
  rows) over all parts, in order, then stores dh and its partial dw for slice s; the slice-0
  program stores loss, count and db."""
  arg_ref, (loss_ref, correct_ref, dh_ref, dw_ref, db_ref) = _pool_refs(refs, pool)
  m, c_pad = h_ref.shape[0], z_ref.shape[1]
  i, s = pl.program_id(0), pl.program_id(1)
  m0 = i * block_m
  row_ok = m0 + jnp.arange(block_m) < m  # Rows past m belong to the next part.
  part = lambda p: common.load_tile(z_ref, p * z_rows + m0, 0, block_m, c_pad, row_ok=row_ok)
  slices = z_ref.shape[0] // z_rows
  if slices <= UNROLL_SLICES:  # Unrolled: the loads in flight together, the same order of adds.
    z = functools.reduce(lambda acc, p: acc + part(p), range(1, slices), part(0))
  else:
    z = lax.fori_loop(1, slices, lambda p, acc: acc + part(p), part(0))
  dz = _loss_and_dz(z, b_ref, labels_ref, loss_ref, correct_ref, i, m, block_m, n_classes,
                    store=s == 0)

  @pl.when(s == 0)
  def _():
    common.store_tile(db_ref, i, 0, jnp.sum(dz, axis=0)[None, :])

  _grads(h_ref, w_ref, dz, dh_ref, dw_ref, i, m0, s * split, split // block_k, block_m, block_k,
         precision, arg_ref, pool)


def choose_blocks(m: int, k: int, blocks=None) -> dict:
  """Block sizes for m rows and inner dimension k: the one-launch form's, or from
  ``SPLIT_K_MIN`` on the split form's (with ``split``); ``blocks`` overrides them (a ``split``
  forces the split form)."""
  if k >= SPLIT_K_MIN:
    return common.blocks(SPLIT_BLOCKS, blocks)
  return common.blocks(LARGE_BLOCKS if m >= LARGE_ROWS else DEFAULT_BLOCKS, blocks)


def grad_layouts(k: int, n: int):
  """The partial dw and db tiles of ``head_call(..., parts=True)`` for K inputs and n classes:
  ((k, n), (k, c_pad)) and ((n,), (c_pad,))."""
  c_pad = common.tile_side(n)
  return ((k, n), (k, c_pad)), ((n,), (c_pad,))


def head_call(h, w, b, labels, *, with_grads, precision="float32", block_m=16, block_k=128,
              split=None, num_warps=4, interpret=False, parts=False, pool=None,
              logits_parts=None):
  """Row losses and correctness, then with ``with_grads`` dh, dw and db: added up, or with
  ``parts`` as the row blocks' partial tiles ((blocks * K, c_pad) and (blocks, c_pad)).
  ``pool`` = (arg, (B, H, W, C)): h is the flattened output of a 2x2 max-pool of a (B, H, W, C)
  map (H and W even) that chose positions ``arg``; dh then comes back as that map's gradient,
  spread by this kernel (``max_pool.spread_tile``), not as h's. ``logits_parts``: h @ w in
  partial sums already, (parts * B, c_pad), part p at rows p * B (the split form only)."""
  (m, k), n = h.shape, w.shape[1]
  c_pad = common.tile_side(n)
  programs = pl.cdiv(m, block_m)
  labels = labels.astype(jnp.int32)
  out_shape = [jax.ShapeDtypeStruct((m,), common.acc_dtype(h.dtype)),
               jax.ShapeDtypeStruct((m,), jnp.int32)]
  pool_args, pool_kw, dh_shape = [], {}, (m, k)
  if pool is not None:
    arg, (_, ph, pw, pc) = pool
    if ph % 2 or pw % 2:
      raise ValueError(f"the pool's spread needs an even map, got {ph} x {pw}")
    pool_args, dh_shape = [arg.reshape(m, k)], (m * ph * pw, pc)
    pool_kw = {"pool": (("h", ph), ("w", pw), ("c", pc))}
  if with_grads:
    out_shape += [jax.ShapeDtypeStruct(dh_shape, h.dtype),
                  jax.ShapeDtypeStruct((programs * k, c_pad), h.dtype),
                  jax.ShapeDtypeStruct((programs, c_pad), h.dtype)]
  params = common.compiler_params(num_warps, 1)
  if logits_parts is not None and not (with_grads and split):
    raise ValueError("logits_parts needs the split form (with_grads and a split)")
  if with_grads and split:
    if split % block_k:
      raise ValueError(f"split {split} must be a multiple of block_k {block_k}")
    grid, m_pad = (programs, pl.cdiv(k, split)), programs * block_m
    sizes = dict(block_m=block_m, block_k=block_k, split=split, precision=precision)
    z_parts, z_rows = logits_parts, m
    if logits_parts is None:
      z_parts, z_rows = pl.pallas_call(
          functools.partial(logits_part_kernel, m_pad=m_pad, **sizes), grid=grid,
          out_shape=jax.ShapeDtypeStruct((grid[1] * m_pad, c_pad), common.acc_dtype(h.dtype)),
          compiler_params=params, interpret=interpret, name="dense_xent_logits")(h, w), m_pad
    outs = pl.pallas_call(
        functools.partial(split_grads_kernel, n_classes=n, z_rows=z_rows, **sizes, **pool_kw),
        grid=grid, out_shape=out_shape, compiler_params=params, interpret=interpret,
        name="dense_xent_grads")(h, w, b, labels, z_parts, *pool_args)
  else:
    kernel = functools.partial(head_kernel, n_classes=n, block_m=block_m, block_k=block_k,
                               precision=precision, **pool_kw)
    outs = pl.pallas_call(kernel, out_shape=out_shape, grid=(programs,), compiler_params=params,
                          interpret=interpret, name="dense_xent")(h, w, b, labels, *pool_args)
  if not with_grads or parts:
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
def _dense_softmax_cross_entropy(h, w, b, labels, precision="float32", blocks=None,
                                 interpret=False):
  sizes = choose_blocks(*h.shape, blocks)
  sizes.pop("split", None)  # Evaluation: the one-launch form.
  loss, correct = head_call(h, w, b, labels, with_grads=False, precision=precision,
                            interpret=interpret, **sizes)
  return common.fixed_order_mean(loss), jnp.sum(correct)


def _vjp_fwd(h, w, b, labels, precision, blocks, interpret):
  loss, correct, dh, dw, db = head_call(h, w, b, labels, with_grads=True, precision=precision,
                                        interpret=interpret, **choose_blocks(*h.shape, blocks))
  return (common.fixed_order_mean(loss), jnp.sum(correct)), (dh, dw, db)


def _vjp_bwd(precision, blocks, interpret, res, cotangents):
  g, _ = cotangents  # The count of correct predictions has no gradient.
  dh, dw, db = res
  return g * dh, g * dw, g * db, None


_dense_softmax_cross_entropy.defvjp(_vjp_fwd, _vjp_bwd)


def dense_softmax_cross_entropy(h, w, b, labels, *, precision="float32", blocks=None,
                                interpret=False):
  """``softmax_cross_entropy(h @ w + b, labels)`` -> (mean loss, number correct), fused."""
  return _dense_softmax_cross_entropy(h, w, b, labels, precision, blocks, interpret)
