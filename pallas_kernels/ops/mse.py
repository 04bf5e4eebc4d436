"""Mean squared error with its gradient written by a Pallas kernel.

Forward: one kernel writes the per-example squared errors (their mean is added up in a fixed
order, ``common.fixed_order_mean``).
Backward: one kernel writes ``2 * (pred - target) * g / B`` directly.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels import common


def reference(pred, target):
  """The plain-jnp twin."""
  return jnp.mean(jnp.square(pred - target))

DEFAULT_BLOCKS = dict(block_m=1024)


def _rows(pred_ref, target_ref, block_m):
  m0 = pl.program_id(0) * block_m
  ok = m0 + jnp.arange(block_m) < pred_ref.shape[0]
  diff = common.load_vec(pred_ref, m0, block_m) - common.load_vec(target_ref, m0, block_m)
  return m0, ok, diff


def sq_err_kernel(pred_ref, target_ref, out_ref, *, block_m):
  m0, ok, diff = _rows(pred_ref, target_ref, block_m)
  common.store_vec(out_ref, m0, diff * diff)


def mse_grad_kernel(pred_ref, target_ref, scale_ref, out_ref, *, block_m):
  m0, ok, diff = _rows(pred_ref, target_ref, block_m)
  common.store_vec(out_ref, m0, 2.0 * diff * scale_ref[...])


def _call(kernel, pred, *args, block_m, interpret, name):
  return pl.pallas_call(
      functools.partial(kernel, block_m=block_m),
      out_shape=jax.ShapeDtypeStruct(pred.shape, pred.dtype),
      grid=(pl.cdiv(pred.shape[0], block_m),),
      compiler_params=common.compiler_params(4, 1), interpret=interpret, name=name)(pred, *args)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _mse(pred, target, blocks=None, interpret=False):
  bl = common.blocks(DEFAULT_BLOCKS, blocks)
  # Summed in a fixed order: XLA's own reduction may round differently from process to process.
  return common.fixed_order_mean(_call(sq_err_kernel, pred, target.astype(pred.dtype),
                                       interpret=interpret, name="sq_err", **bl))


def _mse_vjp_fwd(pred, target, blocks, interpret):
  return _mse(pred, target, blocks, interpret), (pred, target)


def _mse_vjp_bwd(blocks, interpret, res, g):
  pred, target = res
  scale = (g / pred.shape[0]).astype(pred.dtype)
  d = _call(mse_grad_kernel, pred, target.astype(pred.dtype), scale, interpret=interpret,
            name="mse_grad", **common.blocks(DEFAULT_BLOCKS, blocks))
  return d, None


_mse.defvjp(_mse_vjp_fwd, _mse_vjp_bwd)


def mse(pred, target, *, blocks=None, interpret=False):
  """``mean((pred - target)**2)`` for 1-D ``pred`` and ``target``."""
  return _mse(pred, target, blocks, interpret)
