"""The regression net 32-256-1024-256-1's epoch over 128 CTAs that meet at grid barriers (Pallas
Mosaic GPU, Hopper): every product in tiles of 64 x 64, its operands through L2.

The network is 32 -> 256 (ReLU) -> 1024 (ReLU) -> 256 (ReLU) -> 1 with no biases, mean squared
error and plain SGD, batch 256: the regression workload's three-hidden-layer net. Its middle
layers hold 2 MB of weights, and a row quarter's activations of the wide layer are 384 KB as
bfloat16 parts, more than a CTA's shared memory, so ``grid_regression_mgpu``'s layout (whole
rows of activations gathered in each CTA) does not fit. Here every product is cut into tiles of
64 x 64 (wgmma's M, and 128-byte rows) with K = 256 (or 128), and each CTA computes whole tiles,
its operands' parts fetched from global memory (L2) as TMA copies of 16 KB, in halves of K of
128 (both waited for, then each product of parts over both). The 128 CTAs (one a SM, all
resident) form two sets of 64: the low set owns a tile of W1 each, the other a tile of W2
(their float32 in global memory, their bfloat16 parts written for the others by step parity),
and each computes its tile's gradient itself, with K the batch: no partial gradients to add up.
Products with K = 1024 (z3, dh1) are split in parts of K over several CTAs (eighths, quarters),
the partials added in order by the next phase. The CTAs of the first layer (16: row quarter r,
unit block n1) each hold W0[:, n1] and add its gradient up from the four row quarters'
partials in the same order (the four of a block the same bits). A step, its phases apart by
grid barriers:

  A  (16 CTAs) z1[r, n1] = x[r] W0[:, n1]: h1's parts out (and z1, kept for dz1)
  B  (the low 64) z2[r, n2] = h1[r, :] W1[:, n2]; h2's parts out (and z2, kept for dz2)
  C  (128) the partial z3[r, n3] over K eighth e = h2[r, e] W2[e, n3] out
  D  (16) z3[r, n3] = the eight partials in e order; h3's partial outputs, h3 w3[n3], out
  E  (16) the outputs, from the four partials in n3 order; dL/dout; dz3[r, n3]'s parts out,
     dw3's partial over the rows; the outputs
  F  the low 64: dh2[r, n2] = dz3[r, :] W2[n2, :]^T, dz2 = [z2 > 0] dh2, its parts out; the
     other 64: dW2[n2, n3] = h2[:, n2]^T dz3[:, n3], W2's tile updated, its parts out; all:
     w3 from the four dw3 partials
  G  the low 64: dW1[n1, n2] = h1[:, n1]^T dz2[:, n2], W1's tile updated, its parts out; the
     other 64: the partial dh1[r, n1] over quarter q of K = dz2[r, q] W1[n1, q]^T out
  H  (16) dh1[r, n1] = the four partials in q order, dz1 = [z1 > 0] dh1; dW0[:, n1]'s partial
     over the rows, x[r]^T dz1[r, n1], out
  I  (16) dW0[:, n1] = the four partials in r order, W0[:, n1] updated; then the next step's A

Eight grid barriers a step. Registers bound it: a product takes one accumulator, w3 stays in
shared memory (read where used), and the step reads its CTA's index from shared memory, so
that the tiles' indices are not hoisted out of the loop and held (79.0 -> 67.2-69.2 us a step
on the H100, 2026-12-06); and each product's wgmma descriptors are built where it runs
(``FRESH_DESCRIPTORS``): LLVM had built all 216 before the step's loop, and ptxas spilled them
at its 255 registers a thread. With them built in the loop, 194 registers and no spills, 54.0
against 76.0 us a step in one process (H100, jax 0.11.2, 2026-12-07).

Products keep float32's accuracy as ``grid_regression_mgpu``'s do: each operand in three
bfloat16 parts (exact), the six products of parts above float32's rounding (``PAIRS``), the
smallest first.
Sums over CTAs run in fixed orders and nothing uses atomics for floats: every run gives the
same bits.

GPU only: Mosaic GPU's interpreter cannot run the global semaphore; the CPU tests lower it and
check ``reference``, its plain-jnp twin, against float64; ``experiments.check_kernels
--only=tile_regression`` checks the kernel itself on a Hopper GPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.mgpu import descriptors, grid_barrier
from pallas_kernels.ops.dense_mgpu import load as _load, split3, split3_in_kernel, store as _store

BATCH = 256
INPUTS = 32
WIDTHS = (INPUTS, 256, 1024, 256, 1)
T = 64  # A tile's side: wgmma's M, and 64 bfloat16 = 128-byte rows
CTAS = 128  # Two sets of 64: F's and G's two products run side by side, one on each
# The jax versions it was checked with on a GPU against float64 (check_kernels
# --only=tile_regression: H200, 2026-11-28, and H100, 2026-12-06: 0.11.2; H100, 2026-12-07g:
# 0.12.1, 53.22 us a step); with others (it lowers with jax 0.10 too) the epoch path takes the
# grid epoch kernel.
CHECKED = ((0, 11), (0, 12))
WIDE = 256  # A product's K (the batch, or a quarter of the wide layer's 1024)
HALF = WIDE // 2  # Operands come in two halves of K: two TMA copies a part, in flight together
EIGHTHS = 8  # C splits the wide layer's K (1024) in eighths over all 128 CTAs
# The TMA loads' mbarriers: a product's A and B (two halves of three parts each), a weight
# tile's float32, the (up to eight) partial tiles, z1 or z2, y, the partial outputs, the dw3
# partials.
MB_A, MB_B, MB_MASTER, MB_PARTIAL, MB_Z, MB_Y, MB_OUT, MB_DW3 = 0, 6, 12, 13, 21, 22, 23, 24
MBARRIERS = 25
PHASES = ("b", "barrier_b", "c", "barrier_c", "d", "barrier_d", "e", "barrier_e", "f_dh2",
          "f_dw2", "f_w3", "barrier_f", "g_dw1", "g_dh1", "barrier_g", "h", "barrier_h", "i",
          "barrier_i")  # For the profiler
# Grid barriers: one before the first step, one after its A, eight a step.
BARRIERS_PER_STEP = 8
# The products of parts a product sums (the three dropped would cost a third of the tensor
# cores' time, which bounds this kernel's phases).
PAIRS = common.SPLIT3_PAIRS
# Each product's wgmma descriptors computed where it runs, from an offset read then (a zero),
# not hoisted out of the step's loop: the kernel's PTX on the H100 (jax 0.11.2, 2026-12-06f)
# builds all 216 before the loop, and 202 of ptxas' 217 spill stores are 8-byte values stored
# after the first products, 1,616 of its 1,676 bytes (2026-12-07). The same bits, 54.0 us a step
# against 76.0 (H100, jax 0.11.2, 2026-12-07: docs/bench/2026-12-07b_h100). On by default with
# the jax versions it was checked with on a GPU (``descriptors.CHECKED``).
FRESH_DESCRIPTORS = descriptors.checked()


def problem(widths, batch: int, *, bias: bool, optimizer: str, dtype) -> str | None:
  """Why this kernel cannot train the network (one line), or None if it can."""
  return common.phase_kernel_problem(
      widths, batch, want_widths=WIDTHS, want_batch=BATCH, checked=CHECKED, ctas=CTAS,
      bias=bias, optimizer=optimizer, dtype=dtype)


def _block(i):  # Tile i along an axis; a traced i said to be a multiple (Mosaic GPU's layout
  # inference cannot prove it)
  return pl.ds(i * T if isinstance(i, int) else pl.multiple_of(i * T, T), T)


def _kernel(w0_in, w1_in, w2_in, w3_in, xp_in, y_in,  # inputs (global memory)
            w0_m, w1_m, w2_m, w3_out, out_out,  # outputs: the weights (their float32), outputs
            w1p_g, w2p_g, h1_g, z1_g, h2_g, z2_g, p3_g, po_g, dz3_g, dw3_g, dz2_g, p1_g, dw0_g,
            stage, vec, y, po_in, dw3_in, w3_s, c_s, mb, *zero_s, steps: int, lr: float,
            products: int, parts: int, first_only: bool):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16, wgmma_layout = jnp.float32, jnp.bfloat16, plgpu.Layout.WGMMA
  swizzled = _swizzled()
  by_row = plgpu.Layout.WGMMA.reduce(1)  # (64,): one value a row
  by_col = plgpu.Layout.WGMMA.reduce(0)  # (64,): one value a column
  counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))

  def tiles(c):
    low = c < 64  # The set of B, F's dh2 and G's dW1; the other runs F's dW2 and G's dh1
    first = c < 16  # The CTAs of phases A, D, E, H and I
    # Each phase's tile, by CTA (c mod 64 = 16 a + b).
    a16, b16 = lax.div(lax.rem(c, 64), 16), lax.rem(c, 16)
    r1, n1 = lax.div(lax.rem(c, 16), 4), lax.rem(c, 4)  # A, H, I: (r, n1); D, E: (r, n3)
    quarter = lax.rem(c, 4)  # G: the quarter of K
    n_mid = lax.rem(lax.div(c, 4), 4)  # G: n1
    r8, n8, eighth = lax.div(c, 32), lax.rem(lax.div(c, 8), 4), lax.rem(c, 8)  # C: (r, n3, e)
    return c, low, first, a16, b16, r1, n1, quarter, n_mid, r8, n8, eighth
  c, low, first, a16, b16, r1, n1, quarter, n_mid, r8, n8, eighth = tiles(lax.axis_index("cta"))
  # The step's loop reads c again from shared memory, so that nothing derived from it is hoisted
  # out of the loop into registers (see the module's docstring: registers).
  c_s[0] = c
  descriptors.put_zero(zero_s)  # (``FRESH_DESCRIPTORS``) a zero, read where a product is
  wide = pl.ds(0, WIDE)  # A whole K of 256, or all the rows of the batch
  top = _block(0)  # The first rows of a (128, 64) buffer, for 64 x 64 operands

  def rows_of(v):
    return lax.broadcast_in_dim(v, (T, T), [0])

  def cols_of(v):
    return lax.broadcast_in_dim(v, (T, T), [1])

  def parts_of(v):
    return split3_in_kernel(v, ptx=True)

  def buffers(a_tall: bool, b_tall: bool, halves: int = 2):  # A's and B's three parts in
    # halves of K (128), 16 KB each: (128, 64) where tall (K the rows), else (64, 128)
    shape = lambda tall: (HALF, T) if tall else (T, HALF)
    return ([[plgpu.SMEM(shape(a_tall), bf16, transforms=swizzled)] * 3 for _ in range(halves)],
            [[plgpu.SMEM(shape(b_tall), bf16, transforms=swizzled)] * 3 for _ in range(halves)])

  def fetch(src, dst, slot):
    plgpu.copy_gmem_to_smem(src, dst, mb.at[slot])

  def wait(slot, n=1):
    for i in range(n):
      plgpu.barrier_wait(mb.at[slot + i])

  def half(src, h, tall):  # Half h of K of a global (256, 64) (tall) or (64, 256) operand
    k = pl.ds(h * HALF, HALF)
    return src.at[k] if tall else src.at[:, k]

  def fetch_operands(a_src, b_src, a, b, ta=False, tb=False):  # a_src(i): A's part i in
    # global memory; A is tall where transposed, B where not (``parts`` of the three: a probe's)
    for h in range(len(a)):
      for i in range(parts):
        fetch(half(a_src(i), h, ta), a[h][i], MB_A + 3 * h + i)
        fetch(half(b_src(i), h, not tb), b[h][i], MB_B + 3 * h + i)

  def product(a, b, *, ta=False, tb=False, fetched=True):
    # a b (a and b transposed where ta, tb; a[h], b[h] halves of K) as the sum of the
    # products of their parts in PAIRS (the smallest first), on the tensor cores, in one
    # accumulator: each product of parts over both halves before the next, so that the small
    # ones are summed before the large (the tensor cores round each sum toward zero: the
    # halves one after the other in one accumulator, 96 sums, were 2.0e-7 from float64 after a
    # step on an H200, xla's float32 3.0e-8, 2026-11-29). An accumulator a half of K, the first
    # half's products while the second lands, gained nothing (2026-12-07c: its patch in
    # docs/bench/2026-12-07c_h100).
    def run(acc):
      if fetched:
        for h in range(len(a)):
          wait(MB_A + 3 * h, parts)
          wait(MB_B + 3 * h, parts)
      zero = descriptors.read(zero_s)
      for i, j in PAIRS[:products]:  # (fewer: a probe's floor, wrong numbers)
        if fetched and first_only:  # (a probe: every product of the first parts)
          i, j = 0, 0
        for h in range(len(a)):
          plgpu.wgmma(acc, descriptors.operand(a[h][i], zero, ta),
                      descriptors.operand(b[h][j], zero, tb))
      plgpu.wgmma_wait(0)  # (the first pair takes both halves: no overlap with the fetches)
      return acc[...]
    return pl.run_scoped(run, plgpu.ACC((T, T), f32))

  def put(value, refs):  # value's three parts into three refs
    for ref, part in zip(refs, parts_of(value)):
      ref[...] = part

  def send(pairs):  # (shared, global) copies out, waited for: then the barrier may pass
    plgpu.commit_smem()
    for src, dst in pairs:
      plgpu.copy_smem_to_gmem(src, dst)
    plgpu.wait_smem_to_gmem(0)

  def parts_out(value, refs, dst):  # value's parts into refs, then to dst(i); not waited for
    put(value, refs)
    return [(refs[i], dst(i)) for i in range(3)]

  def meet(k, name):  # The k-th grid barrier of the launch (k traced), then loads may read
    with jax.named_scope(name):
      grid_barrier.barrier(counter.at[0], k * CTAS)
      grid_barrier.fence_for_copies()

  def update_tile(master_of, parts_g, a_src, b_src):  # The weight tile at ``master_of()``
    # (float32, global) less lr times its gradient a^T b (a_src, b_src: the operands' parts, K
    # the batch), written back with its parts (to parts_g(i)); in (256, 64) buffers
    def run(a, b):
      master = master_of()
      fetch(master, stage, MB_MASTER)
      fetch_operands(a_src, b_src, a, b, ta=True)
      grad = product(a, b, ta=True)
      wait(MB_MASTER)
      w = _load(stage, wgmma_layout) - lr * grad
      _store(stage, w)
      refs = [ref.at[top] for ref in a[0]]
      put(w, refs)
      send([(stage, master)] + [(refs[i], parts_g(i)) for i in range(3)])
    pl.run_scoped(run, *buffers(True, True))

  def small_refs():  # Three parts of a 64 x 64 operand
    return [plgpu.SMEM((T, T), bf16, transforms=swizzled)] * 3

  def fetch_x(s, refs, r1):  # x[s][r1]'s parts
    for i in range(3):
      fetch(xp_in.at[s, i, _block(r1)], refs[i], MB_A + i)

  def phase_a(w0, x, w, h, r1, n1):  # z1[r1, n1] = x[r1] W0[:, n1] (x[r1] fetched by
    # fetch_x, W0's parts into w): z1 and h1's parts (through h) out
    put(w0, w)
    plgpu.commit_smem()
    wait(MB_A, 3)
    z1 = product([x], [w], fetched=False)
    plgpu.wait_smem_to_gmem(0)  # Whatever ``stage`` was sending (W0's float32) is out.
    _store(stage, z1)
    send([(stage, z1_g.at[_block(r1), _block(n1)])]
         + parts_out(jnp.maximum(z1, 0.0), h, lambda i: h1_g.at[i, _block(r1), _block(n1)]))

  # Before the first step: every weight tile's owner writes its float32 and parts.
  def first_weights(a, b):
    for owner, src, master, parts_g, rows, cols in (
        (low, w1_in, w1_m, w1p_g, a16, b16),  # W1[n1, n2]: c = 16 n1 + n2
        (jnp.logical_not(low), w2_in, w2_m, w2p_g, b16, a16)):  # W2[n2, n3]: c = 64 + 16 n3 + n2
      @pl.when(owner)
      def _():
        fetch(src.at[_block(rows), _block(cols)], stage, MB_MASTER)
        wait(MB_MASTER)
        refs = [ref.at[top] for ref in a[0]]
        put(_load(stage, wgmma_layout), refs)
        send([(stage, master.at[_block(rows), _block(cols)])]
             + [(refs[i], parts_g.at[0, i, _block(rows), _block(cols)]) for i in range(3)])

    @pl.when(first)
    def _():
      fetch(w0_in.at[:, _block(n1)], stage, MB_MASTER)
      wait(MB_MASTER)
      send([(stage, w0_m.at[r1, :, _block(n1)])])
  pl.run_scoped(first_weights, *buffers(True, True))
  # w3[n3] in every CTA (n3 = c mod 4): the 16 of phase D and E use it
  fetch(w3_in, dw3_in, MB_DW3)
  wait(MB_DW3)
  w3_s.at[0][...] = _load(dw3_in.at[n1], by_col)  # in shared memory by step parity
  meet(1, "start")

  @pl.when(first)
  def _():
    def run(x, w, h):
      fetch(w0_m.at[r1, :, _block(n1)], stage, MB_MASTER)
      fetch_x(0, x, r1)
      wait(MB_MASTER)
      phase_a(_load(stage, wgmma_layout), x, w, h, r1, n1)
    pl.run_scoped(run, small_refs(), small_refs(), small_refs())
  meet(2, "start")

  def step(s, carry):
    c, low, first, a16, b16, r1, n1, quarter, n_mid, r8, n8, eighth = tiles(c_s[0])
    parity = lax.rem(s, 2)

    def w3():  # Read where used, not held across the step
      return _load(w3_s.at[parity], by_col)
    k0 = 2 + BARRIERS_PER_STEP * s  # The barriers before this step's

    # B: z2[r, n2] = h1[r, :] W1[:, n2] (r = a16, n2 = b16); z2 (kept for F) and h2's parts
    # out.
    @pl.when(low)
    def _():
      def phase_b(a, b):
        fetch_operands(lambda i: h1_g.at[i, _block(a16)],
                       lambda i: w1p_g.at[parity, i, wide, _block(b16)], a, b)
        z2 = product(a, b)
        _store(stage, z2)
        send([(stage, z2_g.at[_block(a16), _block(b16)])]
             + parts_out(jnp.maximum(z2, 0.0), [ref.at[top] for ref in b[0]],
                         lambda i: h2_g.at[i, _block(a16), _block(b16)]))
      with jax.named_scope("b"):
        pl.run_scoped(phase_b, *buffers(False, True))
    meet(k0 + 1, "barrier_b")

    # C: the partial z3[r, n3] over K eighth e: h2[r, e] W2[e, n3] (all 128 CTAs).
    def phase_c(a, b):
      with jax.named_scope("c"):
        k = pl.ds(pl.multiple_of(eighth * HALF, HALF), HALF)
        fetch_operands(lambda i: h2_g.at[i, _block(r8), k],
                       lambda i: w2p_g.at[parity, i, k, _block(n8)], a, b)
        _store(stage, product(a, b))
        send([(stage, p3_g.at[eighth, _block(r8), _block(n8)])])
    pl.run_scoped(phase_c, *buffers(False, True, halves=1))
    meet(k0 + 2, "barrier_c")

    # D: z3[r, n3] (kept in ``stage`` until E); h3's partial outputs out.
    @pl.when(first)
    def _():
      def run(partials):
        for e in range(EIGHTHS):
          fetch(p3_g.at[e, _block(r1), _block(n1)], partials.at[e], MB_PARTIAL + e)
        wait(MB_PARTIAL, EIGHTHS)
        z3 = _load(partials.at[0], wgmma_layout)
        for e in range(1, EIGHTHS):  # e order: the same bits in every run
          z3 = z3 + _load(partials.at[e], wgmma_layout)
        _store(stage, z3)
        vec[...] = jnp.sum(jnp.maximum(z3, 0.0) * cols_of(w3()), axis=1)
        send([(vec, po_g.at[n1, _block(r1)])])
      with jax.named_scope("d"):
        pl.run_scoped(run, plgpu.SMEM((EIGHTHS, T, T), f32))
    meet(k0 + 3, "barrier_d")

    # E: the outputs and dL/dout; dz3[r, n3]'s parts, the dw3 partial, the outputs out.
    @pl.when(first)
    def _():
      def run(refs):
        fetch(po_g.at[:, _block(r1)], po_in, MB_OUT)
        fetch(y_in.at[s, r1], y, MB_Y)
        wait(MB_OUT)
        wait(MB_Y)
        out = _load(po_in.at[0], by_row)
        for n in range(1, 4):  # n3 order
          out = out + _load(po_in.at[n], by_row)
        g_out = (out - _load(y, by_row)) * (2.0 / BATCH)
        z3 = _load(stage, wgmma_layout)
        pairs = parts_out(jnp.where(z3 > 0.0, rows_of(g_out) * cols_of(w3()), 0.0), refs,
                          lambda i: dz3_g.at[i, _block(r1), _block(n1)])
        vec[...] = jnp.sum(jnp.maximum(z3, 0.0) * rows_of(g_out), axis=0)
        send(pairs + [(vec, dw3_g.at[r1, _block(n1)])])

        @pl.when(n1 == 0)
        def _():
          vec[...] = out
          send([(vec, out_out.at[s, r1])])
      with jax.named_scope("e"):
        pl.run_scoped(run, [plgpu.SMEM((T, T), bf16, transforms=swizzled)] * 3)
    meet(k0 + 4, "barrier_e")

    # F: the low set: dh2[r, n2] = dz3[r, :] W2[n2, :]^T, dz2 = [z2 > 0] dh2 (r = a16,
    # n2 = b16), its parts out; the other: W2[n2, n3]'s tile (n3 = a16) updated from its
    # gradient h2[:, n2]^T dz3[:, n3], its parts out; every CTA: w3.
    fetch(dw3_g.at[:, _block(n1)], dw3_in, MB_DW3)  # (for w3, at F's end)

    @pl.when(low)
    def _():
      def phase_f_dh2(a, b):
        fetch(z2_g.at[_block(a16), _block(b16)], stage, MB_Z)
        fetch_operands(lambda i: dz3_g.at[i, _block(a16)],
                       lambda i: w2p_g.at[parity, i, _block(b16)], a, b, tb=True)
        dh2 = product(a, b, tb=True)
        wait(MB_Z)
        return jnp.where(_load(stage, wgmma_layout) > 0.0, dh2, 0.0)

      def send_dz2(refs):
        send(parts_out(dz2, refs, lambda i: dz2_g.at[i, _block(a16), _block(b16)]))
      with jax.named_scope("f_dh2"):
        dz2 = pl.run_scoped(phase_f_dh2, *buffers(False, False))
        pl.run_scoped(send_dz2, small_refs())

    @pl.when(jnp.logical_not(low))
    def _():
      with jax.named_scope("f_dw2"):
        update_tile(lambda: w2_m.at[_block(b16), _block(a16)],
                    lambda i: w2p_g.at[1 - parity, i, _block(b16), _block(a16)],
                    lambda i: h2_g.at[i, wide, _block(b16)],
                    lambda i: dz3_g.at[i, wide, _block(a16)])
    with jax.named_scope("f_w3"):
      wait(MB_DW3)
      dw3 = _load(dw3_in.at[0], by_col)
      for q in range(1, 4):  # r order
        dw3 = dw3 + _load(dw3_in.at[q], by_col)
      w3_s.at[1 - parity][...] = w3() - lr * dw3
    meet(k0 + 5, "barrier_f")

    # G: the low set: W1[n1, n2]'s tile (n1 = a16, n2 = b16) updated from h1[:, n1]^T
    # dz2[:, n2]; the other: the partial dh1[r, n1] over K quarter q, dz2[r, q] W1[n1, q]^T.
    @pl.when(low)
    def _():
      with jax.named_scope("g_dw1"):
        update_tile(lambda: w1_m.at[_block(a16), _block(b16)],
                    lambda i: w1p_g.at[1 - parity, i, _block(a16), _block(b16)],
                    lambda i: h1_g.at[i, wide, _block(a16)],
                    lambda i: dz2_g.at[i, wide, _block(b16)])

    @pl.when(jnp.logical_not(low))
    def _():
      def phase_g_dh1(a, b):
        k = pl.ds(pl.multiple_of(quarter * WIDE, WIDE), WIDE)
        fetch_operands(lambda i: dz2_g.at[i, _block(a16), k],
                       lambda i: w1p_g.at[parity, i, _block(n_mid), k], a, b, tb=True)
        _store(stage, product(a, b, tb=True))
        send([(stage, p1_g.at[quarter, _block(a16), _block(n_mid)])])
      with jax.named_scope("g_dh1"):
        pl.run_scoped(phase_g_dh1, *buffers(False, False))
    meet(k0 + 6, "barrier_g")

    # H: dz1[r, n1] from the four partials of dh1 and z1 (its parts, in shared memory only);
    # dW0[:, n1]'s partial over the rows, x[r]^T dz1[r, n1], out.
    @pl.when(first)
    def _():
      def run(partials, x, refs):
        for q in range(4):
          fetch(p1_g.at[q, _block(r1), _block(n1)], partials.at[q], MB_PARTIAL + q)
        fetch(z1_g.at[_block(r1), _block(n1)], stage, MB_Z)
        fetch_x(s, x, r1)
        wait(MB_PARTIAL, 4)
        wait(MB_Z)
        dh1 = _load(partials.at[0], wgmma_layout)
        for q in range(1, 4):  # q order
          dh1 = dh1 + _load(partials.at[q], wgmma_layout)
        put(jnp.where(_load(stage, wgmma_layout) > 0.0, dh1, 0.0), refs)
        plgpu.commit_smem()
        wait(MB_A, 3)
        _store(stage, product([x], [refs], ta=True, fetched=False))
        send([(stage, dw0_g.at[r1, :, _block(n1)])])
      with jax.named_scope("h"):
        pl.run_scoped(run, plgpu.SMEM((4, T, T), f32), small_refs(), small_refs())
    meet(k0 + 7, "barrier_h")

    # I: W0[:, n1] updated from the four partials of dW0 in r order (the four CTAs of n1 the
    # same bits); then the next step's A.
    @pl.when(first)
    def _():
      def run(partials, x, w, h):
        master = w0_m.at[r1, :, _block(n1)]
        fetch(master, stage, MB_MASTER)
        for q in range(4):
          fetch(dw0_g.at[q, :, _block(n1)], partials.at[q], MB_PARTIAL + q)
        last = s + 1 == steps

        @pl.when(jnp.logical_not(last))
        def _():
          fetch_x(s + 1, x, r1)
        wait(MB_PARTIAL, 4)
        dw0 = _load(partials.at[0], wgmma_layout)
        for q in range(1, 4):  # r order
          dw0 = dw0 + _load(partials.at[q], wgmma_layout)
        wait(MB_MASTER)
        w0 = _load(stage, wgmma_layout) - lr * dw0
        _store(stage, w0)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(stage, master)  # (waited for in phase_a, or here)

        @pl.when(last)
        def _():
          plgpu.wait_smem_to_gmem(0)

        @pl.when(jnp.logical_not(last))
        def _():
          phase_a(w0, x, w, h, r1, n1)
      with jax.named_scope("i"):
        pl.run_scoped(run, plgpu.SMEM((4, T, T), f32), small_refs(), small_refs(),
                      small_refs())
    meet(k0 + 8, "barrier_i")
    return carry

  lax.fori_loop(0, steps, step, 0)
  c, _, _, _, _, _, n1, *_ = tiles(c_s[0])

  @pl.when(c < 4)  # (n3 = c: the four blocks of w3)
  def _():
    send([(w3_s.at[steps % 2], w3_out.at[n1])])


def _swizzled():
  """The tensor cores' operands' transforms: tiles of 8 rows of 64 bfloat16, swizzled."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  return (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))


@functools.lru_cache(maxsize=None)
def _call(steps: int, lr: float, profile_dir: str | None = None, products: int = len(PAIRS),
          parts: int = 3, first_only: bool = False, fresh: bool = False):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  shape = jax.ShapeDtypeStruct
  _, h1, h2, h3, _ = WIDTHS
  params = {}
  if profile_dir:  # (as grid_regression_mgpu sizes it)
    params.update(profile_space=3 * len(PHASES) * steps, profile_dir=profile_dir)
  return plgpu.kernel(
      functools.partial(_kernel, steps=steps, lr=lr, products=products, parts=parts,
                        first_only=first_only),
      out_type=(shape((4, T, h1), f32), shape((h1, h2), f32), shape((h2, h3), f32),
                shape((4, T), f32), shape((steps, 4, T), f32),
                # The exchanges, read back and dropped: W1's and W2's parts by parity; h1's
                # parts and z1; h2's parts and z2; the partials of z3; the partial outputs;
                # dz3's parts; the dw3 partials; dz2's parts; the partials of dh1 and of dW0.
                shape((2, 3, h1, h2), bf16), shape((2, 3, h2, h3), bf16),
                shape((3, BATCH, h1), bf16), shape((BATCH, h1), f32),
                shape((3, BATCH, h2), bf16), shape((BATCH, h2), f32),
                shape((EIGHTHS, BATCH, h3), f32), shape((4, BATCH), f32),
                shape((3, BATCH, h3), bf16), shape((4, h3), f32),
                shape((3, BATCH, h2), bf16), shape((4, BATCH, h1), f32),
                shape((4, T, h1), f32)),
      grid=(CTAS,), grid_names=("cta",),
      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane,
                                           **params),
      scratch_types=[
          plgpu.SMEM((T, T), f32),  # a weight tile's float32; a partial; z1; z3 (D to E)
          plgpu.SMEM((T,), f32),  # a vector out
          plgpu.SMEM((T,), f32),  # y[r]
          plgpu.SMEM((4, T), f32),  # the partial outputs
          plgpu.SMEM((4, T), f32),  # the dw3 partials; w3's first fetch
          plgpu.SMEM((2, T), f32),  # w3 by step parity
          plgpu.SMEM((1,), jnp.int32),  # c, read again each step
          plgpu.Barrier(num_barriers=MBARRIERS),
      ] + descriptors.scratch(fresh))  # (``FRESH_DESCRIPTORS``)


def train_steps(w0, w1, w2, w3, xs, ys, lr: float, profile_dir: str | None = None,
                products: int = len(PAIRS), parts: int = 3, first_only: bool = False,
                fresh_descriptors: bool | None = None):
  """``steps`` SGD steps in one launch: w0 (32, 256), w1 (256, 1024), w2 (1024, 256), w3 (256,),
  xs (steps, 256, 32), ys (steps, 256) float32. Returns (w0, w1, w2, w3, losses), losses
  (steps,) each step's mean squared error before its update. Hopper only; ``profile_dir`` adds
  Mosaic GPU's profiler (a few steps only); ``products`` below len(PAIRS) leaves the smaller
  products of parts out (wrong numbers: what the rest costs, ``probes.grid_regression --floor``);
  ``first_only`` takes every product of parts whose operands are fetched (phases B, C, F, G; not
  A and H) on the operands' first parts, and ``parts`` 1 (with it) fetches only those from
  global memory (wrong numbers: what the fetches and the distinct parts cost);
  ``fresh_descriptors`` (default ``FRESH_DESCRIPTORS``) computes each product's operand
  descriptors where it runs."""
  if parts not in (1, 3) or (parts == 1 and not first_only):
    raise ValueError(f"parts: 3, or 1 with first_only for a probe; not parts={parts} with "
                     f"first_only={first_only}")
  steps = xs.shape[0]
  grid_barrier.check_resident_ctas(CTAS)
  xp = jnp.stack(split3(jnp.pad(xs, ((0, 0), (0, 0), (0, T - INPUTS)))), axis=1)
  w0p = jnp.pad(w0, ((0, T - INPUTS), (0, 0)))
  fresh = FRESH_DESCRIPTORS if fresh_descriptors is None else fresh_descriptors
  w0m, w1, w2, w3, outs, *_ = _call(steps, float(lr), profile_dir, products, parts, first_only,
                                    fresh)(w0p, w1, w2, w3.reshape(4, T), xp,
                                           ys.reshape(steps, 4, T))
  sq = jnp.square(outs.reshape(steps, BATCH) - ys)
  return w0m[0, :INPUTS], w1, w2, w3.reshape(-1), jax.vmap(common.fixed_order_mean)(sq)


def reference(w0, w1, w2, w3, xs, ys, lr: float):
  """The plain-jnp twin of ``train_steps``: the same steps, products at ``w0``'s dtype's full
  precision, the sums over parts of K (z3's eighths, dh1's quarters), over unit blocks (the
  outputs) and over row quarters (dw3, dW0) in the kernel's orders."""
  hi = lax.Precision.HIGHEST

  def in_order(parts):  # parts (n, ...) added up in index order
    return functools.reduce(jnp.add, [parts[i] for i in range(parts.shape[0])])

  def by_parts(a, b, n):  # a b as the sum over n equal parts of K, in order
    a = a.reshape(a.shape[0], n, -1).transpose(1, 0, 2)
    b = b.reshape(n, -1, b.shape[1])
    return in_order(jnp.einsum("qrk,qkn->qrn", a, b, precision=hi))

  def step(carry, xy):
    w0, w1, w2, w3 = carry
    x, y = xy
    z1 = jnp.dot(x, w0, precision=hi)
    h1 = jnp.maximum(z1, 0.0)
    z2 = jnp.dot(h1, w1, precision=hi)
    h2 = jnp.maximum(z2, 0.0)
    z3 = by_parts(h2, w2, EIGHTHS)
    h3 = jnp.maximum(z3, 0.0)
    out = in_order(jnp.sum((h3 * w3).reshape(BATCH, 4, T), axis=2).T)
    r = out - y
    g_out = r * (2.0 / BATCH)
    dz3 = jnp.where(z3 > 0, g_out[:, None] * w3, 0.0)
    dw3 = in_order(jnp.sum((h3 * g_out[:, None]).reshape(4, T, -1), axis=1))
    dz2 = jnp.where(z2 > 0, jnp.dot(dz3, w2.T, precision=hi), 0.0)
    dz1 = jnp.where(z1 > 0, by_parts(dz2, w1.T, 4), 0.0)
    w2_new = w2 - lr * jnp.dot(h2.T, dz3, precision=hi)
    w1_new = w1 - lr * jnp.dot(h1.T, dz2, precision=hi)
    w0_new = w0 - lr * in_order(jnp.einsum("qri,qrj->qij", x.reshape(4, T, -1),
                                           dz1.reshape(4, T, -1), precision=hi))
    return (w0_new, w1_new, w2_new, w3 - lr * dw3), jnp.mean(r * r)

  (w0, w1, w2, w3), losses = lax.scan(step, (w0, w1, w2, w3), (xs, ys))
  return w0, w1, w2, w3, losses


def train_epoch(params, x, y, order, lr: float, *, steps: int, use_kernel: bool):
  """One epoch: params [{"w": (32, 256)}, {"w": (256, 1024)}, {"w": (1024, 256)},
  {"w": (256, 1)}], x (N, 32), y (N,) or (N, 1), order (>= steps * 256,). Returns (params,
  per-step losses). ``use_kernel``: the grid kernel (Hopper), else ``reference``."""
  idx = order[:steps * BATCH]
  xs = x[idx].astype(jnp.float32).reshape(steps, BATCH, INPUTS)
  ys = y[idx].astype(jnp.float32).reshape(steps, BATCH)
  w = [p["w"] for p in params]
  run = train_steps if use_kernel else reference
  w0, w1, w2, w3, losses = run(w[0], w[1], w[2], w[3][:, 0], xs, ys, lr)
  return [{"w": w0}, {"w": w1}, {"w": w2}, {"w": w3[:, None]}], losses
