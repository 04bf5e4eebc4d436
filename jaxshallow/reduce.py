"""Sums in a fixed order, so that reported losses repeat bit for bit from process to process.

XLA may compile a float reduction to a fusion whose tiling it autotunes per process, so its
rounding can change between runs; chains of elementwise adds cannot. The kernels keep their own
twin (``pallas_kernels.common.fixed_order_sum``, the same order): they do not import the library.
"""

from __future__ import annotations

import functools
import operator

import jax.numpy as jnp


def fixed_order_sum(v):
  """``v.sum()`` of a 1-D array: 32 interleaved runs added row by row, then the runs' sums."""
  n = v.shape[0]
  rows = -(-n // 32)
  runs = jnp.pad(v, (0, rows * 32 - n)).reshape(32, rows)
  totals = functools.reduce(operator.add, list(runs))
  return functools.reduce(operator.add, list(totals))


def fixed_order_mean(v):
  """``v.mean()`` of a 1-D array, summed as ``fixed_order_sum``."""
  return fixed_order_sum(v) / v.shape[0]
