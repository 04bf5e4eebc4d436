"""Fused dense layer: ``y = act(x @ w + b)`` with ``act`` ReLU or identity.

Forward: one kernel. Each program owns a (block_m, block_n) tile of ``y``, loops over K in steps
of ``block_k``, then adds the bias and applies ReLU in registers before the single store.

Backward (``g = dy * [y > 0]``, the ReLU mask applied inside each kernel, never as its own pass):
  dx = g @ w^T            one kernel, tiles of dx, loop over N
  dw = x^T @ g, db = sum_rows(g)
                          one kernel, tiles of dw, loop over M; db comes from the same g tiles

Edges: every load and store is masked, so any M, K, N works with any power-of-two block sizes
(Triton needs powers of two, and at least 16 for the operands of a dot).

Weight layout: ``w_transposed=True`` takes W stored pre-transposed, as (N, K), the layout a CUDA
study of this MLP found faster for its hand-written kernels; dw then comes back as (N, K) too.
The kernels only swap which tile they load and which operand of the tile product is transposed.
``benchmarks.floors`` times both layouts (docs/design/op_kernels.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.ops import dense_mgpu


def reference(x, w, b=None, *, relu=False):
  """The plain-jnp twin: ``act(x @ w + b)`` with exact float32 products."""
  y = jnp.dot(x, w, precision=lax.Precision.HIGHEST)
  if b is not None:
    y = y + b
  return jax.nn.relu(y) if relu else y


# Block sizes by batch rows and precision, each the fastest of a sweep on the GPU
# (docs/design/op_kernels.md). Up to 128 rows: many thin programs with long K steps (16x16x128),
# one set for all kernels; up to 256, 32x32x64 in 3 stages. Above: the forward and dw apart, as
# the sweep of the 784 -> 256 layer found them, with larger tiles from _LARGE_ROWS rows.
# dw's splits give the GPU enough programs: its (K, N) tiles alone are 14 to 200. "x_transposed":
# the forward keeps x^T (K, M) for dw, written by XLA beside x, so that dw's product takes both
# operands in their natural layout; it paid only from 4096 rows, and not in bfloat16 (there it
# saved less than the transpose cost).
_SMALL = dict(block_m=16, block_n=16, block_k=128, num_warps=4, num_stages=2)
_MEDIUM = dict(block_m=32, block_n=32, block_k=64, num_warps=4, num_stages=3)
_LARGE_ROWS = 4096
_LARGE = {  # (precision, kernel, rows >= _LARGE_ROWS) -> blocks
    ("float32", "fwd", False): dict(block_m=32, block_n=32, block_k=32, num_warps=4, num_stages=2),
    ("float32", "fwd", True): dict(block_m=64, block_n=64, block_k=32, num_warps=4, num_stages=3),
    ("float32", "dw", False): dict(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=3,
                                   dw_splits=32),
    ("float32", "dw", True): dict(block_m=32, block_n=64, block_k=64, num_warps=4, num_stages=3,
                                  dw_splits=32, x_transposed=True),
    ("tf32", "fwd", False): dict(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=3),
    ("tf32", "fwd", True): dict(block_m=128, block_n=64, block_k=32, num_warps=4, num_stages=3),
    ("tf32", "dw", False): dict(block_m=64, block_n=128, block_k=128, num_warps=8, num_stages=2,
                                dw_splits=16),
    ("tf32", "dw", True): dict(block_m=32, block_n=64, block_k=128, num_warps=4, num_stages=3,
                               dw_splits=8, x_transposed=True),
    ("bfloat16", "fwd", False): dict(block_m=64, block_n=64, block_k=64, num_warps=4,
                                     num_stages=3),
    ("bfloat16", "fwd", True): dict(block_m=64, block_n=128, block_k=32, num_warps=4,
                                    num_stages=3),
    ("bfloat16", "dw", False): dict(block_m=64, block_n=128, block_k=128, num_warps=8,
                                    num_stages=2, dw_splits=16),
    ("bfloat16", "dw", True): dict(block_m=32, block_n=128, block_k=128, num_warps=8,
                                   num_stages=3, dw_splits=16),
}


def default_blocks(m: int, k: int, precision: str = "float32", kernel: str = "fwd") -> dict:
  """Block sizes (and warps, stages, dw's splits) of ``kernel`` ("fwd", "dx" or "dw") for an
  (m, k) input. dx takes the forward's: both are (rows, K) x (K, N)-shaped products. No K step
  is wider than K needs (the regression net's K = 32)."""
  if m <= 256:
    blocks = dict(_SMALL if m <= 128 else _MEDIUM)
  else:
    blocks = dict(_LARGE[precision, "dw" if kernel == "dw" else "fwd", m >= _LARGE_ROWS])
  blocks["block_k"] = min(blocks["block_k"], max(16, pl.next_power_of_2(k)))
  return blocks


def kernel_blocks(m: int, k: int, precision: str, kernel: str, overrides, w_transposed=False):
  """Keyword arguments of one kernel's wrapper: ``default_blocks``, or with ``overrides`` (a
  tuple of (name, value) pairs, from ``--blocks`` or the autotuner) those tiles for every
  kernel, with 4 warps, 2 stages and dw in one pass. x stays as it is for W stored as (N, K)."""
  if overrides:
    blocks = common.blocks(dict(_SMALL), overrides)
  else:
    blocks = default_blocks(m, k, precision, kernel)
  if w_transposed:
    blocks.pop("x_transposed", None)
  return dict(blocks, precision=precision)


def _relu_grad(dy_ref, y_ref, r0, c0, br, bc):
  """The tile of ``dy * [y > 0]`` (just ``dy`` when there is no ReLU)."""
  dy = common.load_tile(dy_ref, r0, c0, br, bc)
  if y_ref is None:
    return dy
  return jnp.where(common.load_tile(y_ref, r0, c0, br, bc) > 0, dy, 0.0)


# Kernels -------------------------------------------------------------------------------------

def _load_w(w_ref, k0, n0, block_k, block_n, w_transposed):
  """The (k0, n0) tile of W: (block_k, block_n), or (block_n, block_k) if W is stored as (N, K)."""
  if w_transposed:
    return common.load_tile(w_ref, n0, k0, block_n, block_k)
  return common.load_tile(w_ref, k0, n0, block_k, block_n)


def dense_fwd_kernel(x_ref, w_ref, *rest, relu, has_bias, block_m, block_n, block_k, precision,
                     w_transposed):
  b_ref, y_ref = (rest if has_bias else (None, *rest))
  m0, n0 = pl.program_id(0) * block_m, pl.program_id(1) * block_n

  def body(k, acc):
    x = common.load_tile(x_ref, m0, k * block_k, block_m, block_k)
    w = _load_w(w_ref, k * block_k, n0, block_k, block_n, w_transposed)
    return acc + common.dot(x, w, precision, trans_b=w_transposed)

  acc = lax.fori_loop(0, pl.cdiv(x_ref.shape[1], block_k), body,
                      jnp.zeros((block_m, block_n), common.acc_dtype(x_ref.dtype)))
  if has_bias:
    acc += common.load_vec(b_ref, n0, block_n)[None]
  if relu:
    acc = jnp.maximum(acc, 0.0)
  common.store_tile(y_ref, m0, n0, acc)


def dense_dx_kernel(dy_ref, *rest, relu, block_m, block_n, block_k, precision, w_transposed):
  y_ref, w_ref, dx_ref = (rest if relu else (None, *rest))
  m0, k0 = pl.program_id(0) * block_m, pl.program_id(1) * block_k

  def body(n, acc):
    g = _relu_grad(dy_ref, y_ref, m0, n * block_n, block_m, block_n)
    w = _load_w(w_ref, k0, n * block_n, block_k, block_n, w_transposed)
    return acc + common.dot(g, w, precision, trans_b=not w_transposed)

  acc = lax.fori_loop(0, pl.cdiv(dy_ref.shape[1], block_n), body,
                      jnp.zeros((block_m, block_k), common.acc_dtype(dy_ref.dtype)))
  common.store_tile(dx_ref, m0, k0, acc)


def dense_dw_kernel(x_ref, dy_ref, *rest, relu, has_bias, block_m, block_n, block_k, precision,
                    w_transposed, x_transposed, splits):
  y_ref, *outs = (rest if relu else (None, *rest))
  dw_ref, db_ref = (outs if has_bias else (outs[0], None))
  k0, n0, split = pl.program_id(0) * block_k, pl.program_id(1) * block_n, pl.program_id(2)
  (m, n), k = dy_ref.shape, x_ref.shape[0 if x_transposed else 1]
  # This program's share of the row blocks: split s of ``splits`` takes a contiguous run.
  per_split = pl.cdiv(pl.cdiv(m, block_m), splits)
  first = split * per_split

  def body(i, carry):
    acc, db = carry
    m0 = (first + i) * block_m
    g = _relu_grad(dy_ref, y_ref, m0, n0, block_m, block_n)
    db += jnp.sum(g, axis=0)
    if x_transposed:  # x stored as (K, M): its tile is the product's left operand as it is.
      return acc + common.dot(common.load_tile(x_ref, k0, m0, block_k, block_m), g,
                              precision), db
    x = common.load_tile(x_ref, m0, k0, block_m, block_k)
    # x^T g, or its (N, K) transpose g^T x when W is stored as (N, K).
    a, b = (g, x) if w_transposed else (x, g)
    return acc + common.dot(a, b, precision, trans_a=True), db

  tile = (block_n, block_k) if w_transposed else (block_k, block_n)
  acc, db = lax.fori_loop(0, per_split, body,
                          (jnp.zeros(tile, common.acc_dtype(x_ref.dtype)),
                           jnp.zeros((block_n,), common.acc_dtype(dy_ref.dtype))))
  # Split s writes rows s * K ... of dw's (splits * K, N) partials (s * N ... when transposed):
  # rows past this split's K must not spill into the next split's.
  rows, r0, c0 = (n, n0, k0) if w_transposed else (k, k0, n0)
  common.store_tile(dw_ref, split * rows + r0, c0, acc,
                    row_ok=common.span(r0, tile[0]) < rows)
  if has_bias:
    @pl.when(pl.program_id(0) == 0)  # Every row of programs sums the same g; one stores it.
    def _():
      common.store_vec(db_ref, split * n + n0, db, ok=common.span(n0, block_n) < n)


# pallas_call wrappers --------------------------------------------------------------------------

def dense_fwd(x, w, b=None, *, relu=False, precision="float32", w_transposed=False,
              block_m=16, block_n=16, block_k=128, num_warps=4, num_stages=2, interpret=False):
  (m, k), n = x.shape, w.shape[0 if w_transposed else 1]
  kernel = functools.partial(dense_fwd_kernel, relu=relu, has_bias=b is not None,
                             block_m=block_m, block_n=block_n, block_k=block_k,
                             precision=precision, w_transposed=w_transposed)
  args = (x, w) if b is None else (x, w, b)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
      grid=(pl.cdiv(m, block_m), pl.cdiv(n, block_n)),
      compiler_params=common.compiler_params(num_warps, num_stages),
      interpret=interpret, name="dense_fwd")(*args)


def dense_dx(dy, y, w, *, relu=False, precision="float32", w_transposed=False, block_m=16,
             block_n=16, block_k=128, num_warps=4, num_stages=2, interpret=False):
  m, (k, n) = dy.shape[0], (w.shape[::-1] if w_transposed else w.shape)
  kernel = functools.partial(dense_dx_kernel, relu=relu, block_m=block_m, block_n=block_n,
                             block_k=block_k, precision=precision, w_transposed=w_transposed)
  args = (dy, y, w) if relu else (dy, w)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((m, k), dy.dtype),
      grid=(pl.cdiv(m, block_m), pl.cdiv(k, block_k)),
      compiler_params=common.compiler_params(num_warps, num_stages),
      interpret=interpret, name="dense_dx")(*args)


def dense_dw(x, dy, y, *, relu=False, has_bias=True, precision="float32", w_transposed=False,
             x_transposed=False, block_m=16, block_n=16, block_k=128, num_warps=4, num_stages=2,
             dw_splits=1, interpret=False):
  """dw (and db) as ``dw_splits`` partial sums over runs of rows, added up in a fixed order
  after the kernel: at large batches the (K, N) tiles alone are too few programs for the GPU.
  ``x_transposed``: ``x`` is given as (K, M), so that the product x^T g reads both operands in
  the layout the tensor cores take (from x as (M, K), its transpose costs a relayout)."""
  (m, n), k = dy.shape, x.shape[0 if x_transposed else 1]
  if x_transposed and w_transposed:
    raise ValueError("x_transposed works with W stored as (K, N) only")
  splits = max(1, min(dw_splits, pl.cdiv(m, block_m)))
  kernel = functools.partial(dense_dw_kernel, relu=relu, has_bias=has_bias, block_m=block_m,
                             block_n=block_n, block_k=block_k, precision=precision,
                             w_transposed=w_transposed, x_transposed=x_transposed,
                             splits=splits)
  shape = (n, k) if w_transposed else (k, n)
  out_shape = [jax.ShapeDtypeStruct((splits * shape[0], shape[1]), x.dtype)]
  if has_bias:
    out_shape.append(jax.ShapeDtypeStruct((splits * n,), x.dtype))
  args = (x, dy, y) if relu else (x, dy)
  outs = pl.pallas_call(
      kernel, out_shape=out_shape, grid=(pl.cdiv(k, block_k), pl.cdiv(n, block_n), splits),
      compiler_params=common.compiler_params(num_warps, num_stages),
      interpret=interpret, name="dense_dw")(*args)
  dw = common.sum_parts(outs[0].reshape(splits, *shape))
  return (dw, common.sum_parts(outs[1].reshape(splits, n))) if has_bias else (dw, None)


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7, 8))
def _dense(x, w, b=None, relu=False, precision="float32", blocks=None, interpret=False,
           w_transposed=False, hopper=False):
  if hopper:
    return dense_mgpu.dense_forward(x, w, b, relu=relu, x3=precision == "float32",
                                      interpret=interpret)[0]
  kw = kernel_blocks(*x.shape, precision, "fwd", blocks)
  return dense_fwd(x, w, b, relu=relu, w_transposed=w_transposed, interpret=interpret, **kw)


def _dense_vjp_fwd(x, w, b, relu, precision, blocks, interpret, w_transposed, hopper):
  if hopper:
    y, xt = dense_mgpu.dense_forward(x, w, b, relu=relu, x3=precision == "float32",
                                       interpret=interpret)
    return y, (xt, w, b, y if relu else None)  # dW's wgmma takes x^T (K-major in the batch)
  y = _dense(x, w, b, relu, precision, blocks, interpret, w_transposed)
  dw_blocks = kernel_blocks(*x.shape, precision, "dw", blocks, w_transposed)
  if dw_blocks.get("x_transposed"):
    x = x.T  # What dw reads; XLA writes it beside x where x is its own output.
  return y, (x, w, b, y if relu else None)  # b rides along only to say whether it exists.


def _dense_vjp_bwd(relu, precision, blocks, interpret, w_transposed, hopper, res, dy):
  x, w, b, y = res
  m, k = dy.shape[0], w.shape[1 if w_transposed else 0]
  kw = dict(relu=relu, interpret=interpret, w_transposed=w_transposed)
  dx = dense_dx(dy, y, w, **kw, **kernel_blocks(m, k, precision, "dx", blocks, w_transposed))
  if hopper:
    dw, db = dense_mgpu.dense_grads(x, dy, y, has_bias=b is not None, interpret=interpret)
    return dx, dw, db
  dw, db = dense_dw(x, dy, y, has_bias=b is not None, **kw,
                    **kernel_blocks(m, k, precision, "dw", blocks, w_transposed))
  return dx, dw, db


_dense.defvjp(_dense_vjp_fwd, _dense_vjp_bwd)


def dense(x, w, b=None, *, relu=False, precision="float32", blocks=None, interpret=False,
          w_transposed=False, hopper=False):
  """``act(x @ w + b)`` through Pallas kernels, forward and backward. ``b`` may be None.

  ``blocks`` is a hashable tuple of (name, value) pairs overriding ``default_blocks``.
  ``w_transposed``: ``w`` is stored as (N, K), and computes ``act(x @ w.T + b)``.
  ``hopper``: the forward and dW as ``dense_mgpu``'s wgmma products (tf32, or float32 as
  3xTF32; Hopper GPUs, or its jnp twin in interpret mode), dx as here.
  """
  return _dense(x, w, b, relu, precision, blocks, interpret, w_transposed, hopper)
