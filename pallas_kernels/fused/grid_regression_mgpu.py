"""The regression net 32-256-256-1's epoch over 64 CTAs that meet at grid barriers (Pallas
Mosaic GPU, Hopper): layers as phases of one launch, their operands through L2.

The network is 32 -> 256 (ReLU) -> 256 (ReLU) -> 1 with no biases, mean squared error and plain
SGD, batch 256: the regression workload's two-hidden-layer net. A cluster kernel cannot hold it
(the second layer reads all 256 units of the first for every row: 256 KB a step, which peers'
shared memory moves too slowly), so its 64 CTAs (r, u), one a SM and all resident, split the
batch into four quarters r of 64 rows (wgmma's M) and each hidden layer into 16 slices u of 16
units. CTA (r, u) keeps W0[:, u] and w2[u] (the same bits in the four CTAs of a slice: they add
the same sums) and a quarter of W1[:, u], rows 64r .. 64r + 63. A step, its phases apart by
grid barriers (``grid_barrier``), every exchange a TMA copy through global memory (L2):

  A  z1 = x[r] W0[:, u]; h1 = relu(z1)'s three bfloat16 parts out
  B  h1[r, :]'s parts in (96 KB; W1[:, u]'s, 32 KB, fetched as A starts); z2 = h1[r] W1[:, u];
     the partial outputs relu(z2) w2[u] (summed over the CTA's 16 units) out
  C  the 16 partial outputs of its rows in, added in u order: the outputs, dL/dout;
     dz2 = [z2 > 0] dL/dout w2[u], its parts out; the part of dW1[:, u] over its rows,
     h1[r]^T dz2, out; the part of dw2[u], likewise
  D  dz2[r, :]'s parts in (W1[u, :]'s, W1's rows that feed its units of h1, fetched as C starts):
     dh1 = dz2[r] W1[u, :]^T, dz1 = [z1 > 0] dh1, the part of dW0[:, u] over its rows,
     x[r]^T dz1, out; the four row quarters' dW1 parts of its quarter in, added in r order:
     its quarter of W1 updated, its parts out (for the next step's B and D, by step parity);
     w2[u] updated
  E  the four dW0 parts in, added in r order, W0[:, u] updated; then the next step's A

Four grid barriers a step (``QUARTER_BARRIERS``: two, and two of a row quarter's). On an H100
(jax 0.11.2, 2026-12-07) a step takes 13.3 us with barriers by quarter and each product's
descriptors built where it runs (``FRESH_DESCRIPTORS``), 16.4 without either; on an H200 the
form without either took 16.5 us against xla's 28; its copies and barriers alone
(``probes.phase_stream`` with its volumes) 8.0 us
(docs/log/2026-11-28_deep-regression-phase-kernel.md). ``PHASES`` names its parts for Mosaic
GPU's profiler (``probes.grid_regression --profile``).

Products keep float32's accuracy: each operand in three bfloat16 parts (exact: 8 + 8 + 8 bits
of float32's 24, ``dense_mgpu.split3``), all nine products of parts, the smallest first: B's
three parts side by side (and a block of zeros, ``WIDE``), one wgmma a part of A. Exchanged
activations and gradients travel as their parts, so the reader needs no split. x comes split
(and padded to 64 inputs with zeros: the transposed product x^T dz1 takes x's inputs as wgmma's
M) by XLA before the launch. Sums over CTAs run in
fixed orders, nothing uses atomics for floats: every run gives the same bits.

GPU only: Mosaic GPU's interpreter cannot run the global semaphore; the CPU tests lower it and
check ``reference``, its plain-jnp twin, against float64; ``experiments.check_kernels
--only=grid_regression`` checks the kernel itself on a Hopper GPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.mgpu import descriptors, grid_barrier
from pallas_kernels.ops.dense_mgpu import load as _load, split3, split3_in_kernel

BATCH = 256
INPUTS = 32
PADDED = 64  # x's inputs (and W0's rows) padded with zeros: wgmma's M in x^T dz1
HIDDEN = 256  # Both hidden layers' width
ROWS = 64  # A CTA's rows: wgmma's M
QUARTERS = BATCH // ROWS  # r
UNITS = 16  # A CTA's units of each hidden layer
SLICES = HIDDEN // UNITS  # u
CTAS = QUARTERS * SLICES
# The jax versions it was checked with on a GPU against float64 (check_kernels
# --only=grid_regression, H200, 2026-11-28: 0.11.2 and 0.12.0.1); with others (jax 0.10, whose
# Mosaic GPU lowers no concatenate in Lane semantics) the trainer keeps xla's path.
CHECKED = ((0, 11), (0, 12))
# Operands B hold their three bfloat16 parts side by side, and a block of zeros: 64 bfloat16,
# 128 bytes a row, so that every operand takes the 128-byte swizzle (wgmma asks one swizzle of
# both operands; the copies move rows of 128 bytes, not 32).
WIDE = 4 * UNITS
# The TMA loads' mbarriers, one a copy in flight, by what they load: x's parts and y (4);
# h1[r, :]'s parts and W1[:, u]'s (4); the partial outputs (1); W1[u, :]'s parts, then dz2[r, :]'s,
# the dW1 and the dw2 parts (3 + 8); the dW0 parts (4); the first weights (3).
MB_X, MB_Y, MB_B, MB_C, MB_D, MB_E, MB_INIT = 0, 3, 4, 10, 11, 22, 26
MBARRIERS = 29
# Barriers 1 and 2 among the 16 CTAs of a row quarter only (what B and C read, h1[r, :] and the
# partial outputs of rows r, comes from their quarter; barriers 3 and 4 stay grid-wide: D and
# E read the four quarters' weight gradients). The same bits; with FRESH_DESCRIPTORS 13.28 us a
# step against 13.43 without (H100, jax 0.11.2, 2026-12-07: docs/bench/2026-12-07b_h100). On by
# default with the jax versions it was checked with (``descriptors.CHECKED``, as the next).
QUARTER_BARRIERS = descriptors.checked()
# Each product's wgmma descriptors computed where it runs, from an offset read then (a zero),
# not hoisted out of the step's loop (the 64-row C product's PTX, 2026-12-07: all 160 built
# before the loop; ``tile_regression_mgpu.FRESH_DESCRIPTORS``). The same bits, 13.43 us a step
# against 16.38 (H100, jax 0.11.2, 2026-12-07: docs/bench/2026-12-07b_h100). On by default with
# the jax versions it was checked with on a GPU (``descriptors.CHECKED``).
FRESH_DESCRIPTORS = descriptors.checked()
PHASES = ("a_product", "a_send", "barrier_1", "b_fetch", "b_product", "b_outputs", "b_send",
          "barrier_2", "c_fetch", "c_outputs", "c_product", "c_send", "barrier_3", "d_fetch",
          "d_products", "d_dw0", "d_send", "barrier_4", "e_update")  # For the profiler


def problem(widths, batch: int, *, bias: bool, optimizer: str, dtype) -> str | None:
  """Why this kernel cannot train the network (one line), or None if it can."""
  return common.phase_kernel_problem(
      widths, batch, want_widths=(INPUTS, HIDDEN, HIDDEN, 1), want_batch=BATCH, checked=CHECKED,
      ctas=CTAS, bias=bias, optimizer=optimizer, dtype=dtype)


def _kernel(w0_in, w1_in, w2_in, xp_in, y_in,  # inputs (global memory)
            w0_out, w1_out, w2_out, out_out,  # outputs
            h1_g, part_g, dz2_g, dw1_g, dw2_g, dw0_g, w1_g, w1c_g,  # exchanges (global memory)
            xp, y, w0p, acts, gp, sendp, f64, vec64, vec16, w2_all, parts_in, dw2_in,
            dw_in, tma, *zero_s, steps: int, lr: float, quarter_barriers: bool):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16, wgmma_layout = jnp.float32, jnp.bfloat16, plgpu.Layout.WGMMA
  swizzled = _swizzled()
  by_row = plgpu.Layout.WGMMA.reduce(1)  # (64,): one value a row
  by_col = plgpu.Layout.WGMMA.reduce(0)  # (16,): one value a unit
  # The grid's arrivals, then each row quarter's (``QUARTER_BARRIERS``)
  counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1 + QUARTERS if quarter_barriers else 1,)))
  r, u = lax.axis_index("row"), lax.axis_index("unit")
  # Multiples of the tiles, said so: Mosaic GPU's layout inference cannot prove it of a traced
  # offset.
  units = pl.ds(pl.multiple_of(u * UNITS, UNITS), UNITS)
  rows = pl.ds(pl.multiple_of(r * ROWS, ROWS), ROWS)

  def rows_of(v):  # (64,) -> (64, 16): v down the rows
    return lax.broadcast_in_dim(v, (ROWS, UNITS), [0])

  def cols_of(v):  # (16,) -> (64, 16): v along the columns
    return lax.broadcast_in_dim(v, (ROWS, UNITS), [1])

  def products(m, a, b, n=WIDE, meanwhile=None, ta=False, tb=False):  # (m, 16): the sum of
    # a_i b_j over i, j (a_i, b transposed where ta, tb) on the tensor cores, b's parts side
    # by side (N = 48 or 64: a few wide instructions, not many of N = 16), the smallest first;
    # ``meanwhile()`` runs while they do (it must not write a or b), and its result comes back
    # beside theirs
    def run(acc):
      zero = descriptors.read(zero_s)  # (``FRESH_DESCRIPTORS``)
      for i in (2, 1, 0):
        plgpu.wgmma(acc, descriptors.operand(a[i], zero, ta), descriptors.operand(b, zero, tb))
      extra = meanwhile() if meanwhile else None
      plgpu.wgmma_wait(0)
      return acc[...], extra
    wide, extra = pl.run_scoped(run, plgpu.ACC((m, n), f32))
    total = wide[:, 2 * UNITS:3 * UNITS] + wide[:, UNITS:2 * UNITS] + wide[:, :UNITS]
    return (total, extra) if meanwhile else total

  zero = plgpu.layout_cast(jnp.zeros((ROWS, UNITS), jnp.bfloat16), wgmma_layout)

  def parts_of(v):  # v's three bfloat16 parts, by the GPU's conversions (split3's bits)
    return split3_in_kernel(v, ptx=True)

  def put(bits, refs):  # Three parts into three refs (to send: a copy reads contiguous memory)
    for ref, part in zip(refs, bits):
      ref[...] = part

  def put_wide(bits, ref):  # Three parts side by side, and a block of zeros (N = 64, for the
    # 128-byte swizzle): an operand B
    ref[...] = jnp.concatenate([*bits, zero], axis=1)

  def send(pairs):  # (shared, global) copies out, waited for: then the barrier may pass
    plgpu.commit_smem()
    for src, dst in pairs:
      plgpu.copy_smem_to_gmem(src, dst)
    plgpu.wait_smem_to_gmem(0)

  def fetch(pairs, first):  # (global, shared) copies in, each on its own mbarrier
    for i, (src, dst) in enumerate(pairs):
      plgpu.copy_gmem_to_smem(src, dst, tma.at[first + i])

  def wait(first, n):
    for i in range(n):
      plgpu.barrier_wait(tma.at[first + i])

  def meet(k):  # The k-th grid barrier of the launch (k traced), then loads may read
    grid_barrier.barrier(counter.at[0], k * CTAS)
    grid_barrier.fence_for_copies()

  def meet_quarter(k):  # The k-th barrier of this row quarter's 16 CTAs
    grid_barrier.barrier(counter.at[1 + r], k * SLICES)
    grid_barrier.fence_for_copies()

  def meet_n(n, s, k):  # The n-th barrier (1-4) of step s; k = 4 s + 1, the barriers before
    if not quarter_barriers:
      return meet(k + n)
    if n <= 2:  # (then two grid barriers a step, and two of the quarter's)
      return meet_quarter(2 * s + n)
    return meet(2 * s + n - 1)

  def fetch_x(s):
    fetch([(xp_in.at[s, r, k], xp[k]) for k in range(3)] + [(y_in.at[s, r], y)], MB_X)

  def quarter(q):  # dw_in's rows 64q .. 64q + 63
    return dw_in.at[pl.ds(q * ROWS, ROWS)]

  descriptors.put_zero(zero_s)
  # The weights: W0[:, u] (padded) and w2[u] as every CTA of slice u holds them, W1's quarter
  # (all of w2: a copy moves a multiple of 128 bytes).
  fetch([(w0_in.at[:, units], f64), (w1_in.at[rows, units], quarter(0)), (w2_in, w2_all)],
        MB_INIT)
  wait(MB_INIT, 3)
  w0, w1q = _load(f64, wgmma_layout), _load(quarter(0), wgmma_layout)
  w2 = _load(w2_all.at[u], by_col)
  put_wide(parts_of(w0), w0p)
  bits = parts_of(w1q)  # The first step's W1 parts, out before the first barrier
  put(bits, sendp)
  put_wide(bits, gp)
  plgpu.commit_smem()
  for i in range(3):
    plgpu.copy_smem_to_gmem(sendp[i], w1_g.at[0, i, rows, units])
  plgpu.copy_smem_to_gmem(gp, w1c_g.at[0, u, rows])
  plgpu.wait_smem_to_gmem(0)
  meet(1)  # Every CTA's first W1 parts out before any step reads them
  fetch_x(0)

  def step(s, carry):
    w0, w1q, w2 = carry
    parity = lax.rem(s, 2)
    k = 4 * s + 1  # The barriers before this step's

    def phases_ab(w1p):  # W1[:, u]'s parts side by side, held from A to B: fetched first
      fetch([(w1c_g.at[parity, u], w1p)], MB_B + 3)  # (written before the last 4th barrier)
      # A: z1 = x[r] W0[:, u]; h1's parts out.
      with jax.named_scope("a_product"):
        wait(MB_X, 3)
        z1 = products(ROWS, xp, w0p)
        put(parts_of(jnp.maximum(z1, 0.0)), sendp)
      with jax.named_scope("a_send"):
        send([(sendp[i], h1_g.at[i, r, :, units]) for i in range(3)])
      with jax.named_scope("barrier_1"):
        meet_n(1, s, k)
      # B: z2 = h1[r] W1[:, u].
      with jax.named_scope("b_fetch"):
        fetch([(h1_g.at[i, r], acts[i]) for i in range(3)], MB_B)
        wait(MB_B, 4)
      with jax.named_scope("b_product"):
        return z1, products(ROWS, acts, w1p)
    z1, z2 = pl.run_scoped(phases_ab, plgpu.SMEM((HIDDEN, WIDE), bf16, transforms=swizzled))
    # The partial outputs out.
    with jax.named_scope("b_outputs"):
      h2 = jnp.maximum(z2, 0.0)
      vec64[...] = jnp.sum(h2 * cols_of(w2), axis=1)
    with jax.named_scope("b_send"):
      send([(vec64, part_g.at[r, u])])
    with jax.named_scope("barrier_2"):
      meet_n(2, s, k)

    def phases_cd(w1r):  # W1[u, :]'s parts one above the other, held from C to D
      fetch([(w1_g.at[parity, i, units, :], w1r.at[pl.ds(i * UNITS, UNITS)])
             for i in range(3)], MB_D)
      # C: the outputs and dL/dout; dz2's parts, the dW1 and dw2 parts out.
      with jax.named_scope("c_fetch"):
        fetch([(part_g.at[r], parts_in)], MB_C)
        wait(MB_C, 1)
        wait(MB_Y, 1)
      with jax.named_scope("c_outputs"):
        out = _load(parts_in.at[0], by_row)
        for peer in range(1, SLICES):  # A fixed order: every CTA of the quarter the same bits
          out = out + _load(parts_in.at[peer], by_row)
        g_out = (out - _load(y, by_row)) * (2.0 / BATCH)
        dz2 = jnp.where(z2 > 0.0, rows_of(g_out) * cols_of(w2), 0.0)
        vec16[...] = jnp.sum(h2 * rows_of(g_out), axis=0)
        bits = parts_of(dz2)
        put_wide(bits, gp)
        put(bits, sendp)
        plgpu.commit_smem()
      def send_small():  # While the tensor cores run: dz2's parts, the dw2 part, outputs
        for i in range(3):
          plgpu.copy_smem_to_gmem(sendp[i], dz2_g.at[i, r, :, units])
        plgpu.copy_smem_to_gmem(vec16, dw2_g.at[r, u])

        @pl.when(u == 0)
        def _():
          vec64[...] = out
          plgpu.commit_smem()
          plgpu.copy_smem_to_gmem(vec64, out_out.at[s, r])
      with jax.named_scope("c_product"):
        dw_in[...], _ = products(HIDDEN, acts, gp, meanwhile=send_small, ta=True)
      with jax.named_scope("c_send"):
        send([(dw_in, dw1_g.at[r, u])])
      with jax.named_scope("barrier_3"):
        meet_n(3, s, k)
      # D: dh1 = dz2[r] W1[u, :]^T.
      with jax.named_scope("d_fetch"):
        fetch([(dz2_g.at[i, r], acts[i]) for i in range(3)]
              + [(dw1_g.at[q, u, rows], quarter(q)) for q in range(QUARTERS)]
              + [(dw2_g.at[:, u], dw2_in)], MB_D + 3)
        wait(MB_D, 11)

      def update_w1():  # While the tensor cores run: W1's quarter and w2, W1's parts out
        dw1 = _load(quarter(0), wgmma_layout)
        dw2 = _load(dw2_in.at[0], by_col)
        for q in range(1, QUARTERS):  # r order
          dw1 = dw1 + _load(quarter(q), wgmma_layout)
          dw2 = dw2 + _load(dw2_in.at[q], by_col)
        w1q_new = w1q - lr * dw1
        bits = parts_of(w1q_new)
        put(bits, sendp)
        plgpu.commit_smem()
        for i in range(3):
          plgpu.copy_smem_to_gmem(sendp[i], w1_g.at[1 - parity, i, rows, units])
        return w1q_new, w2 - lr * dw2, bits
      with jax.named_scope("d_products"):
        return products(ROWS, acts, w1r, 3 * UNITS, meanwhile=update_w1, tb=True)
    dh1, (w1q, w2, bits) = pl.run_scoped(
        phases_cd, plgpu.SMEM((3 * UNITS, HIDDEN), bf16, transforms=swizzled))
    # dz1, the dW0 part out; W1's quarter and w2 updated.
    with jax.named_scope("d_dw0"):
      put_wide(parts_of(jnp.where(z1 > 0.0, dh1, 0.0)), gp)
      plgpu.commit_smem()
      f64[...] = products(PADDED, xp, gp, ta=True)

    @pl.when(s + 1 < steps)
    def _():
      fetch_x(s + 1)
    with jax.named_scope("d_send"):
      put_wide(bits, gp)  # (after the dW0 product, which read dz1's parts there)
      send([(f64, dw0_g.at[r, u]), (gp, w1c_g.at[1 - parity, u, rows])])
    with jax.named_scope("barrier_4"):
      meet_n(4, s, k)
    # E: W0[:, u] updated from the four dW0 parts.
    with jax.named_scope("e_update"):
      fetch([(dw0_g.at[q, u], quarter(q)) for q in range(QUARTERS)], MB_E)
      wait(MB_E, QUARTERS)
      dw0 = _load(quarter(0), wgmma_layout)
      for q in range(1, QUARTERS):
        dw0 = dw0 + _load(quarter(q), wgmma_layout)
      w0 = w0 - lr * dw0
      put_wide(parts_of(w0), w0p)
      plgpu.commit_smem()
    return w0, w1q, w2

  w0, w1q, w2 = lax.fori_loop(0, steps, step, (w0, w1q, w2))
  quarter(0)[...] = w1q
  f64[...] = w0
  vec16[...] = w2
  plgpu.commit_smem()
  plgpu.copy_smem_to_gmem(quarter(0), w1_out.at[rows, units])

  @pl.when(r == 0)  # The four quarters hold the same W0[:, u] and w2[u].
  def _():
    plgpu.copy_smem_to_gmem(f64, w0_out.at[:, units])
    plgpu.copy_smem_to_gmem(vec16, w2_out.at[units])
  plgpu.wait_smem_to_gmem(0)


def _swizzled():
  """The tensor cores' operands' transforms: tiles of 8 rows of 64 bfloat16, swizzled."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  return (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))


@functools.lru_cache(maxsize=None)
def _call(steps: int, lr: float, profile_dir: str | None = None,
          quarter_barriers: bool = False, fresh: bool = False):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  swizzled = _swizzled()
  parts = lambda shape, transforms: [plgpu.SMEM(shape, bf16, transforms=transforms)
                                     for _ in range(3)]  # One ref a part (a list: one argument)
  shape = jax.ShapeDtypeStruct
  params = {}
  if profile_dir:  # (as cluster_epoch_mgpu sizes it)
    params.update(profile_space=3 * len(PHASES) * steps, profile_dir=profile_dir)
  return plgpu.kernel(
      functools.partial(_kernel, steps=steps, lr=lr, quarter_barriers=quarter_barriers),
      out_type=(shape((PADDED, HIDDEN), f32), shape((HIDDEN, HIDDEN), f32),
                shape((HIDDEN,), f32), shape((steps, QUARTERS, ROWS), f32),
                # The exchanges, read back and dropped: h1's parts, the partial outputs,
                # dz2's parts, the dW1 and dw2 parts, the dW0 parts, W1's parts by parity.
                shape((3, QUARTERS, ROWS, HIDDEN), bf16), shape((QUARTERS, SLICES, ROWS), f32),
                shape((3, QUARTERS, ROWS, HIDDEN), bf16),
                shape((QUARTERS, SLICES, HIDDEN, UNITS), f32),
                shape((QUARTERS, SLICES, UNITS), f32),
                shape((QUARTERS, SLICES, PADDED, UNITS), f32),
                # W1's parts by parity, twice: as D reads them (rows), as B does (a slice u's
                # three side by side, contiguous: not 32-byte pieces of rows).
                shape((2, 3, HIDDEN, HIDDEN), bf16),
                shape((2, SLICES, HIDDEN, WIDE), bf16)),
      grid=(QUARTERS, SLICES), grid_names=("row", "unit"),
      # Lane semantics in every jax: jax 0.11's Warpgroup layout inference could not place the
      # activations' tiles, which the copies read whole and write by 16 columns.
      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane,
                                           **params),
      scratch_types=[
          parts((ROWS, PADDED), swizzled),  # x[r]'s parts
          plgpu.SMEM((ROWS,), f32),  # y[r]
          plgpu.SMEM((PADDED, WIDE), bf16, transforms=swizzled),  # W0[:, u]'s, side by side
          parts((ROWS, HIDDEN), swizzled),  # h1[r, :]'s parts (B, C), dz2[r, :]'s (D)
          # dz2's, dz1's, W1's quarter's parts side by side; h1's, dz2's, W1's quarter's apart
          # and plain (to send: a copy reads contiguous memory, and whole rows)
          plgpu.SMEM((ROWS, WIDE), bf16, transforms=swizzled),
          parts((ROWS, UNITS), ()),
          plgpu.SMEM((PADDED, UNITS), f32),  # W0[:, u]; the dW0 part
          plgpu.SMEM((ROWS,), f32),  # partial outputs; outputs
          plgpu.SMEM((UNITS,), f32),  # the dw2 part; w2[u]
          plgpu.SMEM((SLICES, UNITS), f32),  # w2
          plgpu.SMEM((SLICES, ROWS), f32),  # the quarter's partial outputs
          plgpu.SMEM((QUARTERS, UNITS), f32),  # the dw2 parts
          # The dW1 part (C); the four dW1 parts of W1's quarter (D); the four dW0 parts (E)
          plgpu.SMEM((HIDDEN, UNITS), f32),
          plgpu.Barrier(num_barriers=MBARRIERS),
      ] + descriptors.scratch(fresh))  # (``FRESH_DESCRIPTORS``)


def train_steps(w0, w1, w2, xs, ys, lr: float, profile_dir: str | None = None,
                quarter_barriers: bool | None = None, fresh_descriptors: bool | None = None):
  """``steps`` SGD steps in one launch: w0 (32, 256), w1 (256, 256), w2 (256,), xs (steps,
  256, 32), ys (steps, 256) float32. Returns (w0, w1, w2, losses), losses (steps,) each step's
  mean squared error before its update. Hopper only; ``profile_dir`` adds Mosaic GPU's profiler
  (a few steps only: its buffer shares shared memory with the kernel's); ``quarter_barriers``
  (default ``QUARTER_BARRIERS``) meets barriers 1 and 2 by row quarter; ``fresh_descriptors``
  (default ``FRESH_DESCRIPTORS``) computes each product's operand descriptors where it runs."""
  steps = xs.shape[0]
  grid_barrier.check_resident_ctas(CTAS)
  pad = ((0, 0), (0, 0), (0, PADDED - INPUTS))
  xp = jnp.stack(split3(jnp.pad(xs, pad)), axis=1)  # (steps, 3, 256, 64)
  xp = xp.reshape(steps, 3, QUARTERS, ROWS, PADDED).transpose(0, 2, 1, 3, 4)
  w0p = jnp.pad(w0, ((0, PADDED - INPUTS), (0, 0)))
  call = _call(steps, float(lr), profile_dir,
               QUARTER_BARRIERS if quarter_barriers is None else quarter_barriers,
               FRESH_DESCRIPTORS if fresh_descriptors is None else fresh_descriptors)
  w0p, w1, w2, outs, *_ = call(w0p, w1, w2.reshape(SLICES, UNITS), xp,
                               ys.reshape(steps, QUARTERS, ROWS))
  sq = jnp.square(outs.reshape(steps, BATCH) - ys)
  return w0p[:INPUTS], w1, w2, jax.vmap(common.fixed_order_mean)(sq)


def reference(w0, w1, w2, xs, ys, lr: float):
  """The plain-jnp twin of ``train_steps``: the same steps, products at ``w0``'s dtype's full
  precision, the outputs summed over the 16-unit slices in order and the weight gradients over
  the row quarters in order, as the kernel does."""
  hi = lax.Precision.HIGHEST

  def in_order(parts):  # parts (n, ...) added up in index order
    return functools.reduce(jnp.add, [parts[i] for i in range(parts.shape[0])])

  def by_quarter(a, b):  # sum over r of a[r]^T b[r], in r order
    a = a.reshape(QUARTERS, ROWS, -1)
    b = b.reshape(QUARTERS, ROWS, -1)
    return in_order(jnp.einsum("qri,qrj->qij", a, b, precision=hi))

  def step(carry, xy):
    w0, w1, w2 = carry
    x, y = xy
    z1 = jnp.dot(x, w0, precision=hi)
    h1 = jnp.maximum(z1, 0.0)
    z2 = jnp.dot(h1, w1, precision=hi)
    h2 = jnp.maximum(z2, 0.0)
    out = in_order(jnp.sum((h2 * w2).reshape(BATCH, SLICES, UNITS), axis=2).T)
    r = out - y
    g_out = r * (2.0 / BATCH)
    dz2 = jnp.where(z2 > 0, g_out[:, None] * w2, 0.0)
    dz1 = jnp.where(z1 > 0, jnp.dot(dz2, w1.T, precision=hi), 0.0)
    dw2 = in_order(jnp.sum((h2 * g_out[:, None]).reshape(QUARTERS, ROWS, -1), axis=1))
    w1_new = w1 - lr * by_quarter(h1, dz2)
    w0_new = w0 - lr * by_quarter(x, dz1)
    return (w0_new, w1_new, w2 - lr * dw2), jnp.mean(r * r)

  (w0, w1, w2), losses = lax.scan(step, (w0, w1, w2), (xs, ys))
  return w0, w1, w2, losses


def train_epoch(params, x, y, order, lr: float, *, steps: int, use_kernel: bool):
  """One epoch: params [{"w": (32, 256)}, {"w": (256, 256)}, {"w": (256, 1)}], x (N, 32),
  y (N,) or (N, 1), order (>= steps * 256,). Returns (params, per-step losses).
  ``use_kernel``: the grid kernel (Hopper), else ``reference``."""
  idx = order[:steps * BATCH]
  xs = x[idx].astype(jnp.float32).reshape(steps, BATCH, INPUTS)
  ys = y[idx].astype(jnp.float32).reshape(steps, BATCH)
  w0, w1, w2 = params[0]["w"], params[1]["w"], params[2]["w"][:, 0]
  run = train_steps if use_kernel else reference
  w0, w1, w2, losses = run(w0, w1, w2, xs, ys, lr)
  return [{"w": w0}, {"w": w1}, {"w": w2[:, None]}], losses
