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
Measured on the H100 by ``experiments.floors`` (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common


def dense_reference(x, w, b=None, *, relu=False):
  """The plain-jnp twin: ``act(x @ w + b)`` with exact float32 products."""
  y = jnp.dot(x, w, precision=lax.Precision.HIGHEST)
  if b is not None:
    y = y + b
  return jax.nn.relu(y) if relu else y


def default_blocks(m: int, k: int) -> dict:
  """Block sizes by batch, as measured on the H100 (docs/PERFORMANCE.md): up to 256 rows, many
  thin programs with long K steps (16x16x128: 29.6 us per MLP step at batch 64, against 40.4
  for 32x32x32); above that, 32x32x32 tiles (1.6x faster at batch 8192). No K step is wider
  than K needs (the regression net's K = 32)."""
  blocks = (dict(block_m=16, block_n=16, block_k=128) if m <= 256 else
            dict(block_m=32, block_n=32, block_k=32))
  blocks["block_k"] = min(blocks["block_k"], max(16, pl.next_power_of_2(k)))
  return blocks


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
                    w_transposed):
  y_ref, *outs = (rest if relu else (None, *rest))
  dw_ref, db_ref = (outs if has_bias else (outs[0], None))
  k0, n0 = pl.program_id(0) * block_k, pl.program_id(1) * block_n

  def body(m, carry):
    acc, db = carry
    x = common.load_tile(x_ref, m * block_m, k0, block_m, block_k)
    g = _relu_grad(dy_ref, y_ref, m * block_m, n0, block_m, block_n)
    # x^T g, or its (N, K) transpose g^T x when W is stored as (N, K).
    a, b = (g, x) if w_transposed else (x, g)
    return acc + common.dot(a, b, precision, trans_a=True), db + jnp.sum(g, axis=0)

  tile = (block_n, block_k) if w_transposed else (block_k, block_n)
  acc, db = lax.fori_loop(0, pl.cdiv(x_ref.shape[0], block_m), body,
                          (jnp.zeros(tile, common.acc_dtype(x_ref.dtype)),
                           jnp.zeros((block_n,), common.acc_dtype(dy_ref.dtype))))
  common.store_tile(dw_ref, *((n0, k0) if w_transposed else (k0, n0)), acc)
  if has_bias:
    @pl.when(pl.program_id(0) == 0)  # Every row of programs sums the same g; one stores it.
    def _():
      common.store_vec(db_ref, n0, db)


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
             block_m=16, block_n=16, block_k=128, num_warps=4, num_stages=2, interpret=False):
  k, n = x.shape[1], dy.shape[1]
  kernel = functools.partial(dense_dw_kernel, relu=relu, has_bias=has_bias, block_m=block_m,
                             block_n=block_n, block_k=block_k, precision=precision,
                             w_transposed=w_transposed)
  out_shape = [jax.ShapeDtypeStruct((n, k) if w_transposed else (k, n), x.dtype)]
  if has_bias:
    out_shape.append(jax.ShapeDtypeStruct((n,), x.dtype))
  args = (x, dy, y) if relu else (x, dy)
  outs = pl.pallas_call(
      kernel, out_shape=out_shape, grid=(pl.cdiv(k, block_k), pl.cdiv(n, block_n)),
      compiler_params=common.compiler_params(num_warps, num_stages),
      interpret=interpret, name="dense_dw")(*args)
  return (outs[0], outs[1]) if has_bias else (outs[0], None)


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7))
def dense(x, w, b=None, relu=False, precision="float32", blocks=None, interpret=False,
          w_transposed=False):
  """``act(x @ w + b)`` through Pallas kernels, forward and backward. ``b`` may be None.

  ``blocks`` is a hashable tuple of (name, value) pairs overriding ``default_blocks``.
  ``w_transposed``: ``w`` is stored as (N, K), and computes ``act(x @ w.T + b)``.
  """
  return dense_fwd(x, w, b, relu=relu, precision=precision, w_transposed=w_transposed,
                   interpret=interpret, **common.blocks(default_blocks(*x.shape), blocks))


def _dense_vjp_fwd(x, w, b, relu, precision, blocks, interpret, w_transposed):
  y = dense(x, w, b, relu, precision, blocks, interpret, w_transposed)
  return y, (x, w, b, y if relu else None)  # b rides along only to say whether it exists.


def _dense_vjp_bwd(relu, precision, blocks, interpret, w_transposed, res, dy):
  x, w, b, y = res
  kw = dict(relu=relu, precision=precision, interpret=interpret, w_transposed=w_transposed,
            **common.blocks(default_blocks(*x.shape), blocks))
  dx = dense_dx(dy, y, w, **kw)
  dw, db = dense_dw(x, dy, y, has_bias=b is not None, **kw)
  return dx, dw, db


dense.defvjp(_dense_vjp_fwd, _dense_vjp_bwd)
