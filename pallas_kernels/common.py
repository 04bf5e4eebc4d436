"""Helpers shared by the kernels: precision-aware dot, compiler params, block overrides, and
the choice between compiled and interpreted kernels. The Triton-lowered kernels' helpers import
Pallas' Triton front end where they are called, not here: the Mosaic GPU kernels use this module
too, and a warm run on their path imports no Triton (about 0.1 s; docs/design/time_to_result.md)."""

from __future__ import annotations

import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

# "float32x3": three TF32 tensor-core products per product (operands split into a TF32 part and
# its TF32 remainder), float32 accuracy; GPU only (XLA's CPU dot rejects it).
_PRECISION = {"float32": lax.Precision.HIGHEST, "tf32": lax.Precision.DEFAULT,
              "float32x3": lax.DotAlgorithmPreset.TF32_TF32_F32_X3}


def dot(a, b, precision: str, trans_a: bool = False, trans_b: bool = False):
  """A tile product accumulated in float32: IEEE float32, TF32, 3xTF32, bfloat16 operands, or
  float32 operands split into bfloat16 parts ("split", ``dot_split``)."""
  from jax.experimental.pallas import triton as plgpu
  if precision == "split":
    return dot_split(a, b, trans_a, trans_b)
  if precision == "bfloat16":
    return plgpu.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), trans_a, trans_b)
  return plgpu.dot(a, b, trans_a, trans_b, precision=_PRECISION[precision])


def split3(a):
  """float32 a as three bfloat16 parts whose float32 sum is a, exactly (each part the rounding
  of what the earlier ones left: the next 8 bits of a's 24), so bfloat16 tensor-core products
  of the parts lose nothing. Plain jnp, like ``dense_mgpu.split_tf32``, and in bits because
  XLA on GPUs drops a float32 -> bfloat16 -> float32 round trip (it allows excess precision),
  which would leave the later parts zero."""
  parts = []
  for _ in range(3):
    bits = lax.bitcast_convert_type(a, jnp.int32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & jnp.int32(-65536)  # to nearest even, 0xFFFF0000
    rounded = lax.bitcast_convert_type(bits, jnp.float32)  # a bfloat16 value, in float32
    parts.append(rounded.astype(jnp.bfloat16))  # exact
    a = a - rounded  # exact: what is left has at most 16 (then 8) bits
  return parts


# The products of split3's parts (i, j) a float32 product on the tensor cores sums, the smallest
# first: the six of orders i + j <= 2 (the three dropped are below 2^-24 of the product, float32's
# own rounding; they would cost a third of the tensor cores' time). The Mosaic GPU kernels' order.
SPLIT3_PAIRS = sorted(((i, j) for i in range(3) for j in range(3) if i + j <= 2),
                      key=lambda p: -sum(p))


def jax_version() -> tuple[int, int]:
  """This jax's (major, minor): what the kernels checked on a GPU with some versions only test."""
  return tuple(int(v) for v in jax.__version__.split(".")[:2])


def dot_split(a, b, trans_a: bool = False, trans_b: bool = False, a_exact: bool = False):
  """A float32 product on the tensor cores as accurate as float32's: each operand as ``split3``'s
  three bfloat16 parts, and the six products of parts down to 2^-16 of the leading one, the
  smallest first, accumulated in float32 (the three left out are under 2^-24 of |a| |b|).
  3xTF32 (TF32's 11 bits twice: 22 of float32's 24) ran faster in the grid epoch kernel but was
  measured less accurate than float32 there (docs/design/epoch_kernels.md).
  ``a_exact``: a holds bfloat16 values already (integers up to 256), so only b is split."""
  from jax.experimental.pallas import triton as plgpu
  b3 = split3(b)
  if a_exact:  # a's values are bfloat16's (integer pixels): three exact products.
    a16 = a.astype(jnp.bfloat16)
    d = lambda j: plgpu.dot(a16, b3[j], trans_a, trans_b)
    return (d(2) + d(1)) + d(0)
  a3 = split3(a)
  d = lambda i, j: plgpu.dot(a3[i], b3[j], trans_a, trans_b)
  return ((d(1, 1) + d(0, 2) + d(2, 0)) + (d(0, 1) + d(1, 0))) + d(0, 0)


def sgd_float32_problem(optimizer: str, dtype) -> str | None:
  """What every Mosaic GPU epoch kernel asks of a network: plain SGD, float32. One line, or
  None."""
  if optimizer != "sgd":
    return f"it runs plain SGD, not {optimizer}"
  if jnp.dtype(dtype) != jnp.float32:
    return f"it computes in float32, not {jnp.dtype(dtype).name}"
  return None


def plain_sgd_problem(batch: int, want: int, *, bias: bool, optimizer: str, dtype) -> str | None:
  """What the regression nets' Mosaic GPU kernels ask of a network beside its widths: batch
  ``want``, no biases, plain SGD, float32. One line, or None."""
  if batch != want:
    return f"it takes batch {want}, not {batch}"
  if bias:
    return "it has no biases"
  return sgd_float32_problem(optimizer, dtype)


def phase_kernel_problem(widths, batch: int, *, want_widths, want_batch: int, checked, ctas: int,
                         bias: bool, optimizer: str, dtype) -> str | None:
  """What a regression net's phase kernel (``grid_regression_mgpu``, ``tile_regression_mgpu``)
  asks of a network: its widths, ``plain_sgd_problem``'s, a jax it was checked with on a GPU
  (``checked``: (major, minor) pairs) and all its ``ctas`` CTAs resident at once (its grid
  barriers). One line, or None."""
  from pallas_kernels.mgpu import grid_barrier
  if tuple(widths) != tuple(want_widths):
    return (f"it trains {'-'.join(map(str, want_widths))}, not "
            f"{'-'.join(map(str, widths))}")
  if why := plain_sgd_problem(batch, want_batch, bias=bias, optimizer=optimizer, dtype=dtype):
    return why
  if (version := jax_version()) not in checked:
    return f"it was not checked on a GPU with jax {version[0]}.{version[1]}"
  if grid_barrier.resident_ctas() < ctas:
    return f"its {ctas} CTAs must all be resident at once, more than this GPU's SMs"
  return None


def acc_dtype(dtype):
  """Accumulate in float32, or float64 for float64 inputs (interpret-mode verification)."""
  return jnp.promote_types(dtype, jnp.float32)


def tile_side(n: int) -> int:
  """The side of a tile that holds n: a power of two (Triton's shapes), at least 16 (the
  smallest a Triton dot takes). Channels, classes and batch rows are padded to it."""
  return max(16, pl.next_power_of_2(n))


def compiler_params(num_warps: int, num_stages: int):
  from jax.experimental.pallas import triton as plgpu
  return plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)


def blocks(defaults: dict, overrides) -> dict:
  """``defaults`` updated by ``overrides``, a hashable tuple of (name, value) pairs or None."""
  return {**defaults, **dict(overrides or ())}


@functools.cache
def interpret_default() -> bool:
  """Compile for real on a GPU; elsewhere interpret the kernels, saying so once."""
  if jax.default_backend() == "gpu":
    return False
  logging.getLogger("jaxshallow").warning(
      "no GPU: Pallas kernels run in interpret mode (same kernel code, executed by XLA on %s)",
      jax.default_backend())
  return True


def sum_parts(parts):
  """``parts.sum(0)`` as a chain of adds, in a fixed order. XLA may compile a reduction to a
  Triton fusion whose tiling it autotunes by timing, so the order of the sum, and its rounding,
  could change from one process to the next; elementwise adds cannot. This keeps a training run
  bit-reproducible across processes."""
  total = parts[0]
  for i in range(1, parts.shape[0]):
    total = total + parts[i]
  return total


def sum_many_parts(parts, group: int = 16):
  """``parts.sum(0)`` in a fixed order for many parts: each run of ``group`` parts first, then
  those sums. One chain over hundreds of small parts leaves each output element a long serial
  chain of loads, which measured slow (docs/design/op_kernels.md); the barrier keeps XLA from
  fusing the two levels back into one such chain."""
  n = parts.shape[0]
  if n <= 2 * group:
    return sum_parts(parts)
  pad = -n % group
  parts = jnp.concatenate([parts, jnp.zeros((pad, *parts.shape[1:]), parts.dtype)])
  runs = parts.reshape(-1, group, *parts.shape[1:])
  return sum_parts(jax.lax.optimization_barrier(sum_parts(runs.swapaxes(0, 1))))


def fixed_order_sum(v):
  """``v.sum()`` of a 1-D array (a batch's row losses, an epoch's step losses) as chains of
  elementwise adds. XLA may compile a float reduction to a fusion whose tiling it autotunes per
  process, so its rounding could differ between runs (seen on the H100: the CNN's reported
  losses, not its weights); elementwise adds keep one order."""
  n = v.shape[0]
  rows = -(-n // 32)
  v = jnp.pad(v, (0, rows * 32 - n)).reshape(32, rows)
  total = v[0]
  for i in range(1, 32):
    total = total + v[i]
  out = total[0]
  for i in range(1, rows):
    out = out + total[i]
  return out


def fixed_order_mean(v):
  """``v.mean()`` of a 1-D array, summed as ``fixed_order_sum``."""
  return fixed_order_sum(v) / v.shape[0]


def step_metrics(metrics):
  """Each step's mean loss and correct count from the per-row losses and correct flags an epoch
  kernel wrote, ``metrics`` (members, steps, 2, rows): losses (members, steps) added in a fixed
  order (the same bits in every process) and counts (members, steps), int32."""
  losses = jax.vmap(jax.vmap(fixed_order_mean))(metrics[:, :, 0])
  return losses, jnp.sum(metrics[:, :, 1], axis=2).astype(jnp.int32)


# Adam as optax.adam computes it with its defaults (b1, b2, eps), which jaxshallow's Adam uses;
# the kernels that run it (the grid epoch kernel, the CNN's update kernel) share these.
ADAM = (0.9, 0.999, 1e-8)


def adam_corrections(count, steps: int, dtype=jnp.float32):
  """Adam's bias-correction factors of ``steps`` steps, as optax computes them (1 - b^t with
  t = count + 1, count + 2, ...), flat: step s's at 2s and 2s + 1, then padding (ones) for a
  kernel's 16-lane loads (``adam_factors``)."""
  b1, b2, _ = ADAM
  t = jnp.asarray(count, jnp.int32) + 1 + jnp.arange(steps, dtype=jnp.int32)
  factors = jnp.stack([1 - b1 ** t, 1 - b2 ** t], axis=1).astype(dtype).reshape(-1)
  return jnp.concatenate([factors, jnp.ones((16,), dtype)])


def adam_factors(corrections_ref, s):
  """Step s's two bias corrections (scalars) from ``adam_corrections``' array, in a Triton-lowered
  kernel: one 16-lane load."""
  factors, lanes = load_vec(corrections_ref, 2 * s, 16, other=1.0), jnp.arange(16)
  return (jnp.sum(jnp.where(lanes == 0, factors, 0.0)),
          jnp.sum(jnp.where(lanes == 1, factors, 0.0)))


def adam_moments(grad, mu, nu, c1, c2):
  """Adam's new moments and its update's direction, in optax's order of operations: m and v,
  then (m / c1) / (sqrt(v / c2) + eps) (the step is -lr times it)."""
  b1, b2, eps = ADAM
  m = (1 - b1) * grad + b1 * mu
  v = (1 - b2) * (grad * grad) + b2 * nu
  return m, v, (m / c1) / (jnp.sqrt(v / c2) + eps)


def _i32(v):
  """An index as int32, the type of program ids, also for Python ints when x64 is enabled."""
  return np.int32(v) if isinstance(v, int) else v.astype(jnp.int32)


# Ragged edges. A tile may reach past the end of an array (M, K, N need not be multiples of the
# blocks), so tiles are addressed by index arrays, ``start + arange(size)``, with a mask, as the
# Pallas GPU ops in the JAX repository do, never by a slice ``pl.ds(start, size)``: a slice must
# lie inside the array (jax >= 0.12 rejects one that does not when it can see its start). Triton
# compiles both forms to the same contiguous, vectorised accesses.

def span(start, size: int):
  """The indices ``start, ..., start + size - 1`` as int32."""
  return _i32(start) + jnp.arange(size, dtype=jnp.int32)


def load_vec(ref, start, size: int, other=0.0, volatile=False):
  """``ref[start:start+size]`` of a 1-D ref, ``other`` past its end. ``volatile``: read memory,
  not a cache line this program may hold (data other programs wrote during this launch)."""
  from jax.experimental.pallas import triton as plgpu
  idx = span(start, size)
  return plgpu.load(ref.at[idx], mask=idx < ref.shape[0], other=other, volatile=volatile)


def store_vec(ref, start, value, ok=None):
  """Store ``value`` at ``ref[start:]`` of a 1-D ref, skipping lanes past its end or not ``ok``."""
  from jax.experimental.pallas import triton as plgpu
  idx = span(start, value.shape[0])
  mask = idx < ref.shape[0]
  if ok is not None:
    mask &= ok
  plgpu.store(ref.at[idx], value.astype(ref.dtype), mask=mask)


def _tile_index(ref, r0, c0, br, bc):
  rows, cols = span(r0, br), span(c0, bc)
  mask = (rows[:, None] < ref.shape[0]) & (cols[None, :] < ref.shape[1])
  return ref.at[rows[:, None], cols[None, :]], mask


def load_tile(ref, r0, c0, br, bc, volatile=False, row_ok=None):
  """``ref[r0:r0+br, c0:c0+bc]`` as a (br, bc) tile, zeros outside the array and in rows where
  ``row_ok`` is False."""
  from jax.experimental.pallas import triton as plgpu
  view, mask = _tile_index(ref, r0, c0, br, bc)
  if row_ok is not None:
    mask &= row_ok[:, None]
  return plgpu.load(view, mask=mask, other=0.0, volatile=volatile)


def store_tile(ref, r0, c0, value, row_ok=None):
  """Store a (br, bc) tile at ``ref[r0, c0]``, skipping what lies outside the array and rows
  where ``row_ok`` is False. Every lane has its own index, so no two lanes write one element."""
  from jax.experimental.pallas import triton as plgpu
  view, mask = _tile_index(ref, r0, c0, *value.shape)
  if row_ok is not None:
    mask &= row_ok[:, None]
  plgpu.store(view, value.astype(ref.dtype), mask=mask)
