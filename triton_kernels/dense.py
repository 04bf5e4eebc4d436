"""Fused dense layer in Triton: ``y = act(x @ w + b)``, ``act`` ReLU or identity; the twin of
``pallas_kernels.ops.dense`` (its small-batch path: one set of tiles, no splits, W as (K, N)).

Forward: each program owns a (BLOCK_M, BLOCK_N) tile of y, loops over K, adds the bias and
applies ReLU in registers before the one store. Backward, with ``g = dy * [y > 0]`` formed
inside each kernel: dx = g w^T (tiles of dx, a loop over N); dw = x^T g and db = the column sums
of g (tiles of dw, a loop over M; the programs of the first row of tiles store db). Every load
and store is masked, so any M, K and N work. Sums run in a fixed order: the same bits every run.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

import triton
import triton.language as tl
import jax_triton as jt

# tl.dot needs 16 or more on every side. The Pallas twin's tiles at small batches, 16x16x128,
# make the 784x256 forward faster than these at batch 64; these are the tiles every check and
# benchmark ran (docs/design/op_kernels.md).
# ``blocks=`` overrides them.
BLOCKS = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
NUM_WARPS = 4


def reference(x, w, b=None, *, relu=False):
  """The plain-jnp twin: ``act(x @ w + b)`` with exact float32 products."""
  y = jnp.dot(x, w, precision=lax.Precision.HIGHEST)
  if b is not None:
    y = y + b
  return jax.nn.relu(y) if relu else y


@triton.jit
def _dot(acc, a, b, PRECISION: tl.constexpr):
  """acc + a @ b: exact float32 products, TF32, or operands rounded to bfloat16."""
  if PRECISION == "bfloat16":
    return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
  elif PRECISION == "tf32":
    return tl.dot(a, b, acc, input_precision="tf32")
  else:
    return tl.dot(a, b, acc, input_precision="ieee")


@triton.jit
def _relu_grad(dy_ptr, y_ptr, rows, cols, M, N, RELU: tl.constexpr):
  """The tile of ``dy * [y > 0]`` (just dy without ReLU) at rows x cols of an (M, N) array."""
  at = rows[:, None] * N + cols[None, :]
  ok = (rows[:, None] < M) & (cols[None, :] < N)
  g = tl.load(dy_ptr + at, mask=ok, other=0.0)
  if RELU:
    g = tl.where(tl.load(y_ptr + at, mask=ok, other=0.0) > 0, g, 0.0)
  return g


@triton.jit
def dense_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M: tl.constexpr, K: tl.constexpr,
                     N: tl.constexpr, HAS_BIAS: tl.constexpr, RELU: tl.constexpr,
                     PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
  rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
  cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
  acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
  for k0 in range(0, K, BLOCK_K):
    ks = k0 + tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + rows[:, None] * K + ks[None, :],
                mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
    w = tl.load(w_ptr + ks[:, None] * N + cols[None, :],
                mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
    acc = _dot(acc, x, w, PRECISION)
  if HAS_BIAS:
    acc += tl.load(b_ptr + cols, mask=cols < N, other=0.0)[None, :]
  if RELU:
    acc = tl.maximum(acc, 0.0)
  tl.store(y_ptr + rows[:, None] * N + cols[None, :], acc,
           mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def dense_dx_kernel(dy_ptr, y_ptr, w_ptr, dx_ptr, M: tl.constexpr, K: tl.constexpr,
                    N: tl.constexpr, RELU: tl.constexpr, PRECISION: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
  rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
  ks = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
  acc = tl.zeros((BLOCK_M, BLOCK_K), tl.float32)
  for n0 in range(0, N, BLOCK_N):
    ns = n0 + tl.arange(0, BLOCK_N)
    g = _relu_grad(dy_ptr, y_ptr, rows, ns, M, N, RELU)
    wt = tl.load(w_ptr + ks[None, :] * N + ns[:, None],  # W^T's (BLOCK_N, BLOCK_K) tile
                 mask=(ks[None, :] < K) & (ns[:, None] < N), other=0.0)
    acc = _dot(acc, g, wt, PRECISION)
  tl.store(dx_ptr + rows[:, None] * K + ks[None, :], acc,
           mask=(rows[:, None] < M) & (ks[None, :] < K))


@triton.jit
def dense_dw_kernel(x_ptr, dy_ptr, y_ptr, dw_ptr, db_ptr, M: tl.constexpr, K: tl.constexpr,
                    N: tl.constexpr, RELU: tl.constexpr, PRECISION: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
  ks = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
  cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
  acc = tl.zeros((BLOCK_K, BLOCK_N), tl.float32)
  db = tl.zeros((BLOCK_N,), tl.float32)
  for m0 in range(0, M, BLOCK_M):
    ms = m0 + tl.arange(0, BLOCK_M)
    g = _relu_grad(dy_ptr, y_ptr, ms, cols, M, N, RELU)
    xt = tl.load(x_ptr + ms[None, :] * K + ks[:, None],  # x^T's (BLOCK_K, BLOCK_M) tile
                 mask=(ms[None, :] < M) & (ks[:, None] < K), other=0.0)
    acc = _dot(acc, xt, g, PRECISION)
    db += tl.sum(g, axis=0)
  tl.store(dw_ptr + ks[:, None] * N + cols[None, :], acc,
           mask=(ks[:, None] < K) & (cols[None, :] < N))
  if tl.program_id(0) == 0:  # Every row of programs sums the same g; one stores it.
    tl.store(db_ptr + cols, db, mask=cols < N)


# triton_call wrappers ------------------------------------------------------------------------

def _grid(a: int, block_a: int, b: int, block_b: int):
  return (triton.cdiv(a, block_a), triton.cdiv(b, block_b))


def dense_fwd(x, w, b, *, relu: bool, precision: str, blocks=None):
  (m, k), n = x.shape, w.shape[1]
  bl = blocks or BLOCKS
  has_bias = b is not None
  return jt.triton_call(
      x, w, b if has_bias else jnp.zeros((n,), x.dtype), kernel=dense_fwd_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
      grid=_grid(m, bl["BLOCK_M"], n, bl["BLOCK_N"]), num_warps=NUM_WARPS,
      name="dense_fwd", M=m, K=k, N=n, HAS_BIAS=has_bias, RELU=relu, PRECISION=precision, **bl)


def dense_dx(dy, y, w, *, relu: bool, precision: str, blocks=None):
  m, (k, n) = dy.shape[0], w.shape
  bl = blocks or BLOCKS
  return jt.triton_call(
      dy, dy if y is None else y, w, kernel=dense_dx_kernel,
      out_shape=jax.ShapeDtypeStruct((m, k), dy.dtype),
      grid=_grid(m, bl["BLOCK_M"], k, bl["BLOCK_K"]), num_warps=NUM_WARPS,
      name="dense_dx", M=m, K=k, N=n, RELU=relu, PRECISION=precision, **bl)


def dense_dw(x, dy, y, *, relu: bool, precision: str, blocks=None):
  (m, k), n = x.shape, dy.shape[1]
  bl = blocks or BLOCKS
  return jt.triton_call(
      x, dy, dy if y is None else y, kernel=dense_dw_kernel,
      out_shape=[jax.ShapeDtypeStruct((k, n), x.dtype), jax.ShapeDtypeStruct((n,), x.dtype)],
      grid=_grid(k, bl["BLOCK_K"], n, bl["BLOCK_N"]), num_warps=NUM_WARPS,
      name="dense_dw", M=m, K=k, N=n, RELU=relu, PRECISION=precision, **bl)


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _dense(x, w, b=None, relu=False, precision="float32"):
  return dense_fwd(x, w, b, relu=relu, precision=precision)


def _dense_vjp_fwd(x, w, b, relu, precision):
  y = dense_fwd(x, w, b, relu=relu, precision=precision)
  return y, (x, w, b, y if relu else None)  # b rides along only to say whether it exists.


def _dense_vjp_bwd(relu, precision, res, dy):
  x, w, b, y = res
  dx = dense_dx(dy, y, w, relu=relu, precision=precision)
  dw, db = dense_dw(x, dy, y, relu=relu, precision=precision)
  return dx, dw, db if b is not None else None


_dense.defvjp(_dense_vjp_fwd, _dense_vjp_bwd)


def dense(x, w, b=None, *, relu=False, precision="float32"):
  """``act(x @ w + b)`` through Triton kernels, forward and backward. ``b`` may be None."""
  return _dense(x, w, b, relu, precision)
