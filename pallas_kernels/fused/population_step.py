"""One SGD step of a one-hidden-layer softmax classifier in two kernels, for many networks at once.

A population of N networks (``jax.vmap`` over these kernels puts the members on a grid axis)
is bound by the hidden layer's weights: 64 members of the 784-256-10 MLP hold 51 MB of W0,
which a step reads in the forward product and reads and writes in the update. XLA's vmapped step
moves it three times in two products (docs/design/populations.md). Here it moves twice, in one
kernel, because step s's update and step s+1's forward meet on the same tile of W0:

  update_forward   program j owns columns j*block_n.. of W0; for each block of K rows it loads
                   the W0 tile, adds x_s^T gs (the update: gs = -lr * dloss/dpre, from the head),
                   stores it, and accumulates x_{s+1} @ (the new tile) in registers; then
                   h_{s+1} = relu(. + b0). No partial sums leave the program.
  head_update      one program a network: logits = h W1 + b1, softmax cross-entropy per row,
                   dz, then for each block of hidden units g = (dz W1^T) [h > 0], gs = -lr g,
                   and the SGD updates of W1, b1 and b0.

A training step is ``head_update`` then ``update_forward``; an epoch runs them in a ``lax.scan``
(``jaxshallow.population``). Images may be uint8 (scaled by 1/255 as they are loaded) or float.
Every reduction is inside one program, in an order fixed at compile time, so results repeat bit
for bit. ``reference`` is the plain-jnp twin of one step.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common
from pallas_kernels.ops.dense_xent import MAX_CLASSES, _logits, _loss_and_dz

# The fastest of a sweep for 64 members of 784-256-10 at batch 64 (docs/design/populations.md):
# ahead of 32x32; larger tiles spill (64x64 with one stage) and run far slower.
DEFAULT_BLOCKS = dict(block_k=16, block_n=64, num_warps=4, num_stages=1)
MAX_BATCH = 128  # The whole batch is one tile of rows in both kernels.


def pixels(x):
  """Images as the model sees them (``jaxshallow.train.to_float``): uint8 scaled to [0, 1] in
  float32, other dtypes as they are."""
  return x.astype(jnp.float32) * (1.0 / 255.0) if x.dtype == jnp.uint8 else x


def reference(w0, b0, w1, b1, x, y, lr, x_next, precision=lax.Precision.HIGHEST):
  """The plain-jnp twin of one step: SGD on batch (x, y), then the hidden activations of
  ``x_next`` under the new weights. Returns (w0, b0, w1, b1, h_next, row_loss, row_correct).
  ``precision``: its products' (DEFAULT: XLA's own TF32 on a GPU)."""
  x, x_next = pixels(x), pixels(x_next)

  def loss(p):
    h = jax.nn.relu(jnp.dot(x, p[0], precision=precision) + p[1])
    z = jnp.dot(h, p[2], precision=precision) + p[3]
    rows = jax.nn.logsumexp(z, axis=1) - jnp.take_along_axis(z, y[:, None], axis=1)[:, 0]
    return jnp.mean(rows), (rows, jnp.argmax(z, axis=1) == y)

  p = (w0, b0, w1, b1)
  grads, (rows, correct) = jax.grad(loss, has_aux=True)(p)
  w0, b0, w1, b1 = (a - lr * g for a, g in zip(p, grads))
  h_next = jax.nn.relu(jnp.dot(x_next, w0, precision=precision) + b0)
  return w0, b0, w1, b1, h_next, rows, correct.astype(jnp.int32)


def _load_pixels(x_ref, k0, block_b, block_k, dtype):
  """The (block_b, block_k) tile of images at columns k0.., zeros outside, as ``dtype``."""
  if x_ref.dtype != jnp.uint8:
    return common.load_tile(x_ref, 0, k0, block_b, block_k).astype(dtype)
  rows, cols = common.span(0, block_b), common.span(k0, block_k)
  mask = (rows[:, None] < x_ref.shape[0]) & (cols[None, :] < x_ref.shape[1])
  x = plgpu.load(x_ref.at[rows[:, None], cols[None, :]], mask=mask, other=0)
  return (x.astype(jnp.float32) * (1.0 / 255.0)).astype(dtype)


# Kernels -------------------------------------------------------------------------------------

def update_forward_kernel(w_ref, x_ref, gs_ref, x_next_ref, b_ref, w_out_ref, h_ref, *, update,
                          block_b, block_k, block_n, precision):
  k = w_ref.shape[0]
  n0 = pl.program_id(0) * block_n
  dtype = common.acc_dtype(w_ref.dtype)
  gs = common.load_tile(gs_ref, 0, n0, block_b, block_n) if update else None

  def body(kk, acc):
    k0 = kk * block_k
    w = common.load_tile(w_ref, k0, n0, block_k, block_n)
    if update:  # W0 += x_s^T gs, the SGD step (gs carries -lr).
      x = _load_pixels(x_ref, k0, block_b, block_k, dtype)
      w = w + common.dot(x, gs, precision, trans_a=True)
    common.store_tile(w_out_ref, k0, n0, w)
    return acc + common.dot(_load_pixels(x_next_ref, k0, block_b, block_k, dtype), w, precision)

  acc = lax.fori_loop(0, pl.cdiv(k, block_k), body, jnp.zeros((block_b, block_n), dtype))
  acc += common.load_vec(b_ref, n0, block_n)[None]
  common.store_tile(h_ref, 0, n0, jnp.maximum(acc, 0.0))


def head_update_kernel(h_ref, labels_ref, b0_ref, w1_ref, b1_ref, lr_ref, gs_ref, b0_out_ref,
                       w1_out_ref, b1_out_ref, loss_ref, correct_ref, *, n_classes, block_b,
                       block_k, precision):
  b, k = h_ref.shape
  c_pad = common.tile_side(n_classes)
  n_k = pl.cdiv(k, block_k)
  z = _logits(h_ref, w1_ref, 0, 0, n_k, block_b, block_k, c_pad, precision)
  dz = _loss_and_dz(z, b1_ref, labels_ref, loss_ref, correct_ref, 0, b, block_b, n_classes)
  neg_lr = -lr_ref[0]
  b1 = common.load_vec(b1_ref, 0, c_pad)
  common.store_vec(b1_out_ref, 0, b1 + neg_lr * jnp.sum(dz, axis=0))

  @pl.loop(0, n_k)
  def _(kk):
    k0 = kk * block_k
    h = common.load_tile(h_ref, 0, k0, block_b, block_k)
    w1 = common.load_tile(w1_ref, k0, 0, block_k, c_pad)
    gs = neg_lr * jnp.where(h > 0, common.dot(dz, w1, precision, trans_b=True), 0.0)
    common.store_tile(gs_ref, 0, k0, gs)
    b0 = common.load_vec(b0_ref, k0, block_k)
    common.store_vec(b0_out_ref, k0, b0 + jnp.sum(gs, axis=0))
    common.store_tile(w1_out_ref, k0, 0, w1 + neg_lr * common.dot(h, dz, precision, trans_a=True))


# pallas_call wrappers --------------------------------------------------------------------------

def _block_b(b: int) -> int:
  return common.tile_side(b)


def update_forward(w, x, gs, x_next, b, *, precision="float32", block_k=16, block_n=64,
                   num_warps=4, num_stages=1, interpret=False):
  """``w + pixels(x)^T gs`` and ``relu(pixels(x_next) @ that + b)``. ``x``, ``x_next``: (B, K)
  images; ``gs``: (B, N), the step's -lr * dloss/dpre. With ``x`` and ``gs`` None, no update:
  ``w`` and the forward of ``x_next`` (an epoch's first batch)."""
  (k, n), bsz = w.shape, x_next.shape[0]
  update = gs is not None
  kernel = functools.partial(update_forward_kernel, update=update, block_b=_block_b(bsz),
                             block_k=block_k, block_n=block_n, precision=precision)
  out_shape = (jax.ShapeDtypeStruct((k, n), w.dtype), jax.ShapeDtypeStruct((bsz, n), w.dtype))
  if not update:  # Placeholders the kernel does not read.
    x, gs = x_next, jnp.zeros((bsz, n), w.dtype)
  return pl.pallas_call(
      kernel, out_shape=out_shape, grid=(pl.cdiv(n, block_n),),
      compiler_params=common.compiler_params(num_warps, num_stages),
      input_output_aliases={0: 0},  # W0 is updated in place: no copy of it a step.
      interpret=interpret, name="population_update_forward")(w, x, gs, x_next, b)


def head_update(h, labels, b0, w1, b1, lr, *, precision="float32", block_k=64, num_warps=4,
                interpret=False):
  """The output layer's loss and SGD step. Returns (gs, b0, w1, b1, row_loss, row_correct),
  with gs = -lr * dloss/d(hidden pre-activation), for ``update_forward``."""
  bsz, c = h.shape[0], w1.shape[1]
  if c > MAX_CLASSES:
    raise ValueError(f"head_update takes at most {MAX_CLASSES} classes, got {c}")
  kernel = functools.partial(head_update_kernel, n_classes=c, block_b=_block_b(bsz),
                             block_k=block_k, precision=precision)
  out_shape = (jax.ShapeDtypeStruct(h.shape, h.dtype), jax.ShapeDtypeStruct(b0.shape, b0.dtype),
               jax.ShapeDtypeStruct(w1.shape, w1.dtype), jax.ShapeDtypeStruct(b1.shape, b1.dtype),
               jax.ShapeDtypeStruct((bsz,), h.dtype), jax.ShapeDtypeStruct((bsz,), jnp.int32))
  lr = jnp.reshape(jnp.asarray(lr, h.dtype), (1,))
  return pl.pallas_call(
      kernel, out_shape=out_shape, grid=(1,),
      compiler_params=common.compiler_params(num_warps, 1),
      interpret=interpret, name="population_head_update")(h, labels, b0, w1, b1, lr)
