"""wgmma operands whose descriptors are built where their product runs (Pallas Mosaic GPU).

A wgmma reads its operands from shared memory through 64-bit descriptors (an operand's address
and its swizzle). Where a kernel's step loop runs the same products every step, their operands'
addresses do not change, and LLVM builds every descriptor once, before the loop: in PTX dumped
on the H100 the tile regression kernel held 216 of them across its step loop (two registers
each) and the 32-256-256-1 kernel's 64-row form 160, and ptxas spilled
(docs/bench/2026-12-07_ptx: that PTX with the descriptors rebuilt in the loop took 166 and 128
registers and no spills, where as dumped it took 255 and spilled). ``operand`` takes a ref at an
offset read from shared memory when the product runs (a zero, ``put_zero``), so that the
address, and so the descriptor, depends on a value the compilers cannot move out of the loop
(whether LLVM still hoists the rest of the address is for the dumped PTX to say:
``probes.spills``). The cost is a shared-memory load a product and a few integer instructions
a descriptor. The kernels take this form by default on the jax versions it was checked with on a
GPU (``CHECKED``), elsewhere the form checked before it.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels import common

# The jax versions with which the phase kernels' and the streamed population kernel's
# fresh-descriptor forms were checked on a GPU, and the phase kernels' timed (the H100: jax
# 0.11.2, 2026-12-07, the streamed kernel's timed too; jax 0.12.1, 2026-12-07g: the same bits,
# check_kernels 24/24, us a step 16.85 -> 13.54, 76.09 -> 53.22 and 49.40 -> 47.03 for
# grid_regression, tile_regression and tile_mlp).
CHECKED = ((0, 11), (0, 12))


def checked() -> bool:
  """Whether this jax is one of ``CHECKED``: the kernels' default for their form."""
  return common.jax_version() in CHECKED


def scratch(fresh: bool) -> list:
  """The scratch a kernel appends to its own: one int32 of shared memory that holds the zero
  where ``fresh``, else nothing (its kernel then takes ``zero_s`` empty)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  return [plgpu.SMEM((1,), jnp.int32)] if fresh else []


def put_zero(zero_s) -> None:
  """Before the loop: every thread writes the zero it reads back (no barrier needed); nothing
  where ``zero_s`` (the kernel's trailing scratch, ``scratch``) is empty."""
  if zero_s:
    zero_s[0][0] = jnp.int32(0)


def read(zero_s):
  """The zero, read now: once a product (a load the compilers cannot move out of the loop);
  None where ``zero_s`` is empty (the descriptors built where the compilers choose)."""
  return zero_s[0][0] if zero_s else None


def operand(ref, zero, transposed: bool = False):
  """``ref`` (transposed) at row offset ``zero`` (from ``read``; rows in tiles of 8 or more),
  or ``ref`` itself where ``zero`` is None."""
  if zero is not None:
    ref = ref.at[pl.ds(pl.multiple_of(zero, 8), ref.shape[0])]
  return ref.transpose((1, 0)) if transposed else ref
