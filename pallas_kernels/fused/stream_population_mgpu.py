"""A population of MLPs 784-256-10 trained with their weights streamed from global memory every
step (Pallas Mosaic GPU, Hopper): a cluster of two CTAs a member, each CTA half its units.

Now (H100, jax 0.11.2, 2026-12-07): ``experiments.check_kernels --only=stream_population``
passes 12/12; a step takes 59.4 us at 64 members and 454.1 at 512, 2.46x and 2.06x xla's
networks/s in ``population_bench`` (docs/design/populations.md). Its walks over W0 wait, by
inference, on each tile's chain (one tile in flight a warpgroup), not on HBM's rate: walking odd
steps in reverse (``REVERSE_ODD``), which takes a third off W0's copies alone, left the step as
it was (2026-12-08). ``AHEAD``, two tiles in flight a warpgroup, is built and run on the CPU in
Mosaic GPU's interpreter, not yet on a GPU; both forms are off by default. First run on an H200
(2026-11-29): 65.0 us a step at 64 members (XLA 182.1) and 58.2 at 8 (XLA 55.0); a
population's epoch at 64 members 66.4 ms against a cluster a member's 71.5
(``cluster_mlp_mgpu``) and xla's 148.3, at 128 members 131.5 against 142.0 and 259.4, at 32
61.6 against 37.6. It is the path (``jaxshallow.paths.population``) for 64, 128, 256 or 512
members a GPU on H200s and the H100 with jax 0.11 and 0.12, where it was measured
(docs/design/populations.md; on the H100 1-2 % ahead; with jax 0.12.1 on the H100 only,
2026-12-07h).

Why: a cluster a member (``cluster_mlp_mgpu.train_population``) keeps each member's W0 in
shared memory and trains in waves of 7 members on an H100, about 2.1x xla at 64 members. 64
members' W0 is 54 MB in float32, more than the L2 and about twice all shared memory, so a
kernel whose step time falls with its members must read every member's W0 from HBM and write
it back once a step: 34.0 us a step for 64 members on an H200 (``probes.weight_stream``,
jax 0.11.2).

Each member is a cluster of two CTAs (grid ``member``, cluster ``half``); CTA h owns units
128 h .. 128 h + 127 as two blocks of 64, W0^T's rows (units) by 832 inputs, with b0 as input
784 (the images' input 784 is 255, so x W0 / 255 adds b0), a warpgroup a block. A step s of a
launch walks W0^T in 13 tiles of 64 inputs through two slots, one tile in flight by TMA while
the other is worked on (each warpgroup its own copies; ``AHEAD``: three slots, two in flight,
x's tiles shared); for each tile and block:

  gradient  dW0^T = dz_{s-1}[:, block]^T x_{s-1}[:, k] on the tensor cores: dz's three
            bfloat16 parts (exact) against the pixels (integers, exact in one part); zero at
            the launch's first step
  update    the tile less lr dW0^T / 255, stored back to where it came from
  forward   z^T += W0^T[block, k] x_s[:, k]^T, the updated tile's three parts taken from
            registers (the tensor cores' A operand; no part is stored), in an accumulator of
            the tile's own, added to z^T in float32

Then h = relu(z / 255); each warpgroup's partial logits (a class a row) on the tensor cores,
W1^T's parts (its classes as rows, padded to 64) by h^T's (in dz's buffer) over the six pairs
of parts above float32's rounding; the rest on the CUDA cores in float32: the partial logits of
the cluster added in CTA and warpgroup order after a barrier of the two warpgroups and a
cluster barrier (read from the peer's shared memory; every warpgroup the same bits), b1 (the
logits kept in shared memory), the softmax's maximum and sums and the loss in passes over the
classes; then class by class dL/dlogits, its term of dz^T and its W1 row and b1 updated; dz^T's
parts for the next step's gradients. A launch of ``steps`` steps runs steps + 1 walks: the
last applies the last step's gradient (its forward is dropped). Every member has its own
learning rate and its own batches, or all members one set (``shared``). Nothing uses atomics:
every run gives the same bits.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.mgpu import descriptors
from pallas_kernels.ops.dense_mgpu import load as _load, split3_in_kernel, store as _store

BATCH = 64
INPUTS = 832  # 784 pixels, b0's input (255), zeros: 13 tiles of 64
TILES = INPUTS // 64
HIDDEN = 256
CLASSES = 10
T = 64  # A block's units, a tile's inputs, the batch: wgmma's M, K and N
BLOCKS = 2  # Blocks of units a CTA
ROWS = 16  # The small rows: b1 by class (each broadcast over 64 lanes), then the learning rate
ROW_LR = CLASSES
# The jax versions it was checked with on a GPU (experiments.check_kernels --only=stream_population)
# and timed ahead of xla there (jax 0.12.1 on the H100, 2026-12-07h: 64 members 1027 networks/s
# against xla's 418, 512 members 1076 against 546)
CHECKED = ((0, 11), (0, 12))
# mbarriers, a warpgroup's: by slot, W0^T's tile and x's two tiles (last step's, this step's);
# the step's one-hot labels; then the first W1 rows, and each warpgroup's small rows. With
# ``AHEAD``: W0^T's slot i at a warpgroup's i (0 to 2, its 3 to 5 unused), and after the rest
# x's tiles, shared: slot i's tile j at MB_X + 2 i + j.
MB_TILE, MB_LABELS, MB_WG = 0, 6, 7
MB_INIT = 2 * MB_WG
MBARRIERS = MB_INIT + 3
MB_X = MBARRIERS
PAIRS = common.SPLIT3_PAIRS  # The partial logits' products of parts
# Each product's wgmma descriptors built where it runs (``descriptors``), not before the walk's
# loop: its PTX (2026-11-29) held 28 across the loop at ptxas' 255 registers and spilled 128 B;
# with them rebuilt there ptxas gave 227 and no spills (docs/bench/2026-12-07_ptx), and the
# phase kernels' steps fell 2-29 % with this form (2026-12-07b). The same bits, 13-14 % less a
# step (64 members 68.65 -> 59.43 us, 512 529.7 -> 454.1; H100, jax 0.11.2, 2026-12-07:
# docs/bench/2026-12-07f_h100). On by default with the jax versions it was checked with on a
# GPU (``descriptors.CHECKED``).
FRESH_DESCRIPTORS = descriptors.checked()
# Two of W0^T's tiles in flight a warpgroup, not one: its tiles in three slots (96 KB, was 64),
# x's tiles shared by the two warpgroups (both walk the same tiles of the same member) in two
# slots (32 KB, was 64; warpgroup 0 fetches them once both are done with the slot), the same
# shared memory. With ``REVERSE_ODD`` odd steps walk the tiles last to first: the tiles a walk
# wrote last are the next walk's first, still in L2 (64 members' W0 is 54 MB, about the L2's
# 50), and the forward's sums run in the other order (other bits, as exact). Both off:
# walking in reverse alone passed the GPU checks and left the step as it was (H100, 2026-12-08),
# the walk, by inference, held by each tile's chain, not by its copies' rate
# (docs/design/populations.md); ``AHEAD`` has run only on the CPU, in Mosaic GPU's
# interpreter (jax 0.12), not yet on a GPU.
AHEAD = False
AHEAD_AT = "store"  # Where tile k fetches tile k + 2 (``walk_ahead``): "start" or "store"
REVERSE_ODD = False


def problem(widths, batch: int, *, bias: bool, optimizer: str, dtype) -> str | None:
  """Why this kernel cannot train a population of this network (one line), or None if it can."""
  if tuple(widths) != (784, HIDDEN, CLASSES):
    return f"it trains 784-{HIDDEN}-{CLASSES}, not {'-'.join(map(str, widths))}"
  if batch != BATCH:
    return f"it takes batch {BATCH}, not {batch}"
  if not bias:
    return "it trains the MLP with biases"
  if why := common.sgd_float32_problem(optimizer, dtype):
    return why
  if common.jax_version() not in CHECKED:
    checked = " or ".join(".".join(map(str, v)) for v in CHECKED)
    return f"it was checked on a GPU with jax {checked}, not {jax.__version__}"
  return None


def _swizzled():
  from jax.experimental.pallas import mosaic_gpu as plgpu
  return (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))


def _kernel(w0t_in, w1_in, small_in, x_in, labels_in,  # inputs (global memory)
            w0t_out, w1_out, small_out, metrics_out,  # outputs
            wbuf, xk, dz, w1s, small, labels, part, logits, metrics, mb, parts_in, peer_in,
            cluster_bar, *rest,  # scratch
            steps: int, shared: bool, parts: str, ptx: bool, ahead: str | None,
            reverse_odd: bool):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16, wgmma_layout = jnp.float32, jnp.bfloat16, plgpu.Layout.WGMMA
  by_row = plgpu.Layout.WGMMA.reduce(1)  # (64,): one value a row (a unit)
  by_col = plgpu.Layout.WGMMA.reduce(0)  # (64,): one value a column (a row of the batch)
  m, h = lax.axis_index("member"), lax.axis_index("half")
  g = lax.axis_index("wg")  # Warpgroup g: the units of block g, its own copies and mbarriers
  data = 0 if shared else m  # The batches' member
  bar = lambda i: mb.at[MB_WG * g + i]  # This warpgroup's mbarrier i
  # ``AHEAD``'s mbarriers of two arrivals: both warpgroups done with x's slot i
  x_free, zero_s = (rest[0], rest[1:]) if ahead else (None, rest)

  def rows_of(v):
    return lax.broadcast_in_dim(v, (T, T), [0])

  def cols_of(v):
    return lax.broadcast_in_dim(v, (T, T), [1])

  def tile(ref, k):  # W0^T's tile k of this warpgroup's block
    return ref.at[m, h, g, :, pl.ds(k * T, T)]

  def order(s, k):  # The walk's k-th tile: k, or on odd steps (``REVERSE_ODD``) 12 - k
    return k + lax.rem(s, 2) * (TILES - 1 - 2 * k) if reverse_odd else k

  def x_tile(slot, j):  # x's tile in a slot: j = 0 last step's, 1 this step's
    return xk.at[slot, j] if ahead else xk.at[g, slot, j]

  def fetch_w(s, k, slot, i):  # W0^T's tile k (the input's at step 0); its mbarrier bar(i)
    pl.when(s == 0)(lambda: plgpu.copy_gmem_to_smem(tile(w0t_in, k), wbuf.at[slot, g],
                                                    bar(i)))
    pl.when(s > 0)(lambda: plgpu.copy_gmem_to_smem(tile(w0t_out, k), wbuf.at[slot, g],
                                                   bar(i)))

  def fetch_x(s, k, slot, barrier):  # x_{s-1}'s and x_s's tile k; barrier(j) tile j's
    for j, at in enumerate((jnp.maximum(s - 1, 0), jnp.minimum(s, steps - 1))):
      plgpu.copy_gmem_to_smem(x_in.at[data, at, :, pl.ds(k * T, T)], x_tile(slot, j),
                              barrier(j))

  def fetch(s, k, slot):  # W0^T's tile k and x's, each warpgroup its own
    k = order(s, k)
    first = MB_TILE + 3 * slot
    fetch_w(s, k, slot, first)
    fetch_x(s, k, slot, lambda j: bar(first + 1 + j))

  def products(parts, b, *, a_refs: bool, tb: bool = False):  # a b (b transposed where tb)
    # over a's parts (``parts()``, the smallest first, made in the accumulator's scope; refs
    # in shared memory where a_refs, else values in registers) on the tensor cores, in an
    # accumulator of its own: they round each sum of 16 products toward zero, so one
    # accumulator over a walk's 156 sums failed the checks; in a numpy model of the rounding it
    # is 6x as far from float64 as float32's own sums, and a tile's 12 then float32's adds 5x
    # closer than they (docs/design/populations.md)
    def run(acc):
      zero = descriptors.read(zero_s)  # (``FRESH_DESCRIPTORS``)
      for a in parts():
        plgpu.wgmma(acc, descriptors.operand(a, zero) if a_refs else a,
                    descriptors.operand(b, zero, tb))
      plgpu.wgmma_wait(0)
      return acc[...]
    return pl.run_scoped(run, plgpu.ACC((T, T), f32))

  def gradient(slot):  # dz[:, block]^T x_{s-1}[:, k] over dz's three parts: the tile's layout
    return products(lambda: [dz.at[i, g] for i in (2, 1, 0)], x_tile(slot, 0), a_refs=True)

  def sync():  # The warpgroup's stores to shared memory before others read them
    plgpu.commit_smem()

  # The launch's first W1 rows and small rows (each warpgroup its own: b1, updated the same
  # way by both, is read by each while the other may be updating it); dz zero (the first walk
  # updates nothing).
  descriptors.put_zero(zero_s)  # (``FRESH_DESCRIPTORS``) a zero, read where a product is
  pl.when(g == 0)(lambda: plgpu.copy_gmem_to_smem(w1_in.at[m, h], w1s, mb.at[MB_INIT]))
  plgpu.copy_gmem_to_smem(small_in.at[m], small.at[g], mb.at[MB_INIT + 1 + g])
  zero = plgpu.layout_cast(jnp.zeros((T, T), bf16), wgmma_layout)
  for i in range(3):
    dz.at[i, g][...] = zero
  sync()  # (the tensor cores read them)
  plgpu.barrier_wait(mb.at[MB_INIT])
  plgpu.barrier_wait(mb.at[MB_INIT + 1 + g])
  # The member's learning rate, one register: a (64, 64) tile of it would hold 16 or more a
  # thread through the whole kernel, and ptxas spilled the walks' registers with it (2026-11-29)
  lr = small[g, ROW_LR, 0]

  def forward(w, slot):  # The tile's term of z^T = W0^T x_s^T over w's three parts, taken
    # from registers (added to z^T in float32 by the walk)
    return products(lambda: reversed(split3_in_kernel(w, ptx=ptx)), x_tile(slot, 1),
                    a_refs=False, tb=True)

  def update_and_forward(s, k, w_slot, x_slot, stored=None):  # Tile k's update, stored
    # back (then ``stored()``, if given); its forward
    w = _load(wbuf.at[w_slot, g], wgmma_layout)
    w = w - lr * (gradient(x_slot) * (1.0 / 255.0))
    _store(wbuf.at[w_slot, g], w)
    sync()  # The new tile visible to the copy (which runs beside the forward products)
    plgpu.copy_smem_to_gmem(wbuf.at[w_slot, g], tile(w0t_out, order(s, k)))
    if stored is not None:
      stored()
    return forward(w, x_slot)

  def walk_ahead(s):  # ``walk`` with two of W0^T's tiles in flight and x's tiles shared: a
    # loop over six tiles (W0^T's slots k mod 3, x's k mod 2, known when the code is built)
    # W0^T's tile k + 2 is fetched when tile k starts (``ahead`` "start") or once tile k's
    # store is issued ("store"): then tile k - 1's store, whose slot it takes, has had tile k's
    # gradient and update to read it, not only tile k - 1's forward.
    def x_bar(slot):  # x's slot's mbarrier of tile j (shared)
      return lambda j: mb.at[MB_X + 2 * slot + j]

    def one(k, w_slot, x_slot, z, last=False):  # (last: the walk's last tile, no fetches)
      def x_next():  # x's tile k + 1 into the other slot, once both are done with tile k - 1
        pl.when(k > 0)(lambda: plgpu.barrier_wait(x_free.at[1 - x_slot]))
        fetch_x(s, order(s, k + 1), 1 - x_slot, x_bar(1 - x_slot))

      def w_next():  # W0^T's tile k + 2 into tile k - 1's slot, once its store has read it
        # (at "store", tile k's own store may still be reading)
        plgpu.wait_smem_to_gmem(1 if ahead == "store" else 0, wait_read_only=True)
        fetch_w(s, order(s, k + 2), (w_slot + 2) % 3, (w_slot + 2) % 3)
      with jax.named_scope("prefetch"):  # (a profile's scopes: probes.stream_population)
        if not last:
          pl.when(jnp.logical_and(g == 0, k + 1 < TILES))(x_next)
        if not last and ahead == "start":
          pl.when(k + 2 < TILES)(w_next)
      with jax.named_scope("tile_wait"):
        plgpu.barrier_wait(bar(w_slot))
        for j in range(2):
          plgpu.barrier_wait(x_bar(x_slot)(j))
      late = not last and ahead == "store"
      stored = (lambda: pl.when(k + 2 < TILES)(w_next)) if late else None
      z = z + update_and_forward(s, k, w_slot, x_slot, stored)
      plgpu.barrier_arrive(x_free.at[x_slot])  # (its products waited for: done with x's slot)
      return z

    def six(i, z):
      for j in range(6):
        z = one(6 * i + j, j % 3, j % 2, z)
      return z

    for k in range(2):
      fetch_w(s, order(s, k), k, k)
    pl.when(g == 0)(lambda: fetch_x(s, order(s, 0), 0, x_bar(0)))
    z = plgpu.layout_cast(jnp.zeros((T, T), jnp.float32), wgmma_layout)
    z = lax.fori_loop(0, TILES // 6, six, z)
    assert TILES % 6 == 1
    z = one(TILES - 1, 0, 0, z, last=True)  # (13 tiles: the last one alone)

    @pl.when(g == 0)
    def _():  # Both done with the walk's last two x tiles before the next walk's fetches
      plgpu.barrier_wait(x_free.at[1])
      plgpu.barrier_wait(x_free.at[0])
    plgpu.wait_smem_to_gmem(0)  # Every tile out before the next walk reads them
    return z

  def walk(s):  # W0^T's 13 tiles: gradients, updates, forward; returns the block's z^T (x 255).
    # A loop over pairs of tiles (each pair's slots 0 and 1, known when the code is built), not
    # 13 tiles unrolled: ptxas held values of one tile across the next and spilled (2026-11-29)
    def one(k, slot, z, prefetch):
      if prefetch:  # Tile k + 1 into the other slot, once tile k - 1 is done with it
        with jax.named_scope("prefetch"):  # (a profile's scopes: probes.stream_population)
          plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # (its store has read W0^T's tile)
          fetch(s, k + 1, 1 - slot)
      with jax.named_scope("tile_wait"):
        for j in range(3):
          plgpu.barrier_wait(bar(MB_TILE + 3 * slot + j))
      return z + update_and_forward(s, k, slot, slot)

    def pair(i, z):
      z = one(2 * i, 0, z, True)
      return one(2 * i + 1, 1, z, True)

    fetch(s, 0, 0)
    z = plgpu.layout_cast(jnp.zeros((T, T), jnp.float32), wgmma_layout)
    z = lax.fori_loop(0, TILES // 2, pair, z)
    assert TILES % 2 == 1
    z = one(TILES - 1, 0, z, False)  # (13 tiles: the last one alone)
    plgpu.wait_smem_to_gmem(0)  # Every tile out before the next walk reads them
    return z

  def cluster_fence():  # Stores before the arrival, and reads after the wait, ordered at the
    # cluster's scope (the cluster barrier's mbarrier orders them at the CTA's only)
    @plgpu.inline_mgpu()
    def emit(ctx):
      from jax._src.lib.mlir import ir
      from jax._src.lib.mlir.dialects import llvm
      llvm.inline_asm(ir.Type.parse("!llvm.void"), [], "fence.acq_rel.cluster;", "",
                      has_side_effects=True)
    emit()

  def meet(parity):  # The cluster's two CTAs, their partial logits stored (the interpreter
    # orders its memory itself and runs no PTX: no fences there)
    if ptx:
      cluster_fence()
    plgpu.barrier_arrive(cluster_bar.at[parity])
    plgpu.barrier_wait(cluster_bar.at[parity])
    if ptx:
      cluster_fence()

  def exchange(parity):  # Both CTAs' partial logits readable by both warpgroups: both
    # arrive at parts_in; the first meets the peer CTA, then lets the second read
    plgpu.barrier_arrive(parts_in)
    plgpu.barrier_wait(parts_in)

    @pl.when(g == 0)
    def _():
      pl.when(parity == 0)(lambda: meet(0))
      pl.when(parity == 1)(lambda: meet(1))
      plgpu.barrier_arrive(peer_in)
    pl.when(g == 1)(lambda: plgpu.barrier_wait(peer_in))

  def classes(body, init, start=0):  # A loop over the classes (unrolled, ptxas held several
    # classes' rows at once and spilled)
    return lax.fori_loop(start, CLASSES, body, init)

  def outputs(s, z):  # Step s's logits, loss, backward into dz, W1 and b1
    parity = lax.rem(s, 2)
    plgpu.copy_gmem_to_smem(labels_in.at[data, s], labels.at[g], bar(MB_LABELS))
    hb = jnp.maximum(z * (1.0 / 255.0), 0.0)  # (z dies here: hb > 0 where z > 0)
    # This warpgroup's partial logits on the tensor cores: W1^T (its classes as rows, padded to
    # wgmma's 64, in a W0 slot: the walk is done with them) by h^T (units by batch, its three
    # parts in dz's buffer: the walk has read dz), over PAIRS of parts. A sum over the units on
    # the CUDA cores crosses the warps through a scratch memory, class by class (17.7 of a
    # step's 117 us under the profiler, the warpgroups one after the other).
    # (The named scopes: a profile's parts of the output layer, probes.stream_population
    # --profile.)
    w1t, prod = wbuf.at[0, g], wbuf.at[1, g]  # (rows past the classes: what the slot held)
    with jax.named_scope("w1_rows"):
      def w1_row(k, carry):
        w1t.at[k][...] = _load(w1s.at[g, k], by_col)
        return carry
      classes(w1_row, None)
    with jax.named_scope("h_parts"):
      for i, p in enumerate(split3_in_kernel(hb, ptx=ptx)):
        dz.at[i, g][...] = p
      sync()  # (W1^T's rows read by other threads, h's parts by the tensor cores)

    with jax.named_scope("partial_logits"):
      def run(acc):
        w_parts = split3_in_kernel(_load(w1t, wgmma_layout), ptx=ptx)
        zero = descriptors.read(zero_s)  # (``FRESH_DESCRIPTORS``)
        for i, j in PAIRS:
          plgpu.wgmma(acc, w_parts[i], descriptors.operand(dz.at[j, g], zero))
        plgpu.wgmma_wait(0)
        return acc[...]
      _store(prod, pl.run_scoped(run, plgpu.ACC((T, T), f32)))
      sync()

    with jax.named_scope("partial_rows"):
      def partial_logits(k, carry):
        part.at[parity, g, k][...] = _load(prod.at[k], by_col)
        return carry
      classes(partial_logits, None)
      sync()
    with jax.named_scope("exchange"):
      exchange(parity)
    # A class's (64,) row of the batch is 16 registers a thread in this layout: the classes'
    # logits, exponentials and gradients side by side would be hundreds, so each pass below
    # holds one class's at a time (a loop, not unrolled) and the logits wait in shared memory.
    logit = lambda k: _load(logits.at[g, k], by_col)
    label = lambda k: _load(labels.at[g, k], by_col)
    with jax.named_scope("logits"):
      for k in range(CLASSES):  # Half 0's partials (by warpgroup), half 1's, then b1: the same
        # bits in every warpgroup (reference adds the halves' sums, then b1)
        terms = [_load(plgpu.cluster_ref(part.at[parity, wg, k], {"half": half}), by_col)
                 for half in range(2) for wg in range(2)]
        logits.at[g, k][...] = functools.reduce(jnp.add, terms) + _load(small.at[g, k], by_col)
      sync()
    with jax.named_scope("softmax"):
      top = classes(lambda k, top: jnp.maximum(top, logit(k)), logit(0), start=1)
      plgpu.barrier_wait(bar(MB_LABELS))

      def sums(k, carry):  # (in class order, as the reference's sums)
        total, picked = carry
        return total + jnp.exp(logit(k) - top), picked + label(k) * logit(k)
      total, picked = classes(sums, (jnp.exp(logit(0) - top), label(0) * logit(0)), start=1)

      @pl.when(jnp.logical_and(h == 0, g == 0))
      def _():
        plgpu.wait_smem_to_gmem(0)  # The last step's metrics out
        metrics.at[0][...] = jnp.log(total) + top - picked
        metrics.at[1][...] = jnp.where(picked >= top, 1.0, 0.0)
        sync()
        plgpu.copy_smem_to_gmem(metrics, metrics_out.at[m, s])

    with jax.named_scope("backward"):  # Class by class: its dL/dlogits row, its term of
      # dz^T = [z > 0] W1 dL/dlogits^T, then its W1 row and b1 (after their use; each b1 row's
      # 64 lanes the same: a sum over the batch each)
      def backward(k, dh):
        dl = (jnp.exp(logit(k) - top) / total - label(k)) * (1.0 / BATCH)
        w1k = _load(w1s.at[g, k], by_row)
        dh = dh + rows_of(w1k) * cols_of(dl)
        w1s.at[g, k][...] = w1k - lr * jnp.sum(hb * cols_of(dl), axis=1)
        small.at[g, k][...] = (_load(small.at[g, k], by_row)
                               - lr * jnp.sum(cols_of(dl), axis=1))
        return dh
      dh = classes(backward, plgpu.layout_cast(jnp.zeros((T, T), f32), wgmma_layout))
    with jax.named_scope("dz_parts"):
      for i, p in enumerate(split3_in_kernel(jnp.where(hb > 0.0, dh, 0.0), ptx=ptx)):
        dz.at[i, g][...] = p
      sync()  # dz's parts before the tensor cores read them

  def step(s, carry):
    if parts == "outputs":  # (a probe's floor: the output layer alone, on z = 0)
      z = plgpu.layout_cast(jnp.zeros((T, T), f32), wgmma_layout)
    else:
      with jax.named_scope("walk"):
        z = walk_ahead(s) if ahead else walk(s)
    if parts != "walk":  # (a probe's floor: the walks alone)
      pl.when(s < steps)(lambda: outputs(s, z))
    return carry

  lax.fori_loop(0, steps + 1, step, None)
  exchange(jnp.int32(steps % 2))  # The peer has read this CTA's last partial logits: exit
  plgpu.copy_smem_to_gmem(w1s.at[g], w1_out.at[m, h, g])

  @pl.when(jnp.logical_and(h == 0, g == 0))
  def _():
    plgpu.copy_smem_to_gmem(small.at[0], small_out.at[m])
  plgpu.wait_smem_to_gmem(0)


@functools.lru_cache(maxsize=None)
def _call(members: int, steps: int, shared: bool, profile_dir: str | None = None,
          parts: str = "all", fresh: bool = False, interpret: tuple | None = None,
          ahead: str | None = None, reverse_odd: bool = False):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  swizzled = _swizzled()
  shape = jax.ShapeDtypeStruct
  params = {}
  if profile_dir:  # Mosaic GPU's profiler: each named scope's start and end a warpgroup
    # (scopes a warpgroup, each of 32 bytes of shared memory, of which the kernel leaves room
    # for about 90: a walk's own, its 12 prefetches and 13 waits for tiles, 26, in steps + 1
    # walks; the output layer's 9 a step; 61 for one step)
    params.update(profile_space=36 * (steps + 1), profile_dir=profile_dir)
  return plgpu.kernel(
      functools.partial(_kernel, steps=steps, shared=shared, parts=parts,
                        ptx=interpret is None, ahead=ahead, reverse_odd=reverse_odd),
      out_type=(shape((members, 2, BLOCKS, T, INPUTS), f32),
                shape((members, 2, BLOCKS, ROWS, T), f32),
                shape((members, ROWS, T), f32),
                shape((members, steps, 2, BATCH), f32)),  # each row's loss and whether right
      grid=(members,), grid_names=("member",), cluster=(2,), cluster_names=("half",),
      num_threads=2, thread_name="wg",
      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane,
                                           **params),
      **({} if interpret is None else {"interpret": plgpu.InterpretGPUParams(**dict(interpret))}),
      scratch_types=[
          plgpu.SMEM((3 if ahead else 2, BLOCKS, T, T), f32),  # W0^T's tiles, by slot
          plgpu.SMEM((2, 2, T, T) if ahead else (2, 2, 2, T, T), bf16,
                     transforms=swizzled),  # x's, (by warpgroup,) by slot
          plgpu.SMEM((3, BLOCKS, T, T), bf16, transforms=swizzled),  # dz^T's parts
          plgpu.SMEM((BLOCKS, ROWS, T), f32),  # W1's rows (a class a row), by block
          plgpu.SMEM((2, ROWS, T), f32),  # b1 by class, the learning rate
          plgpu.SMEM((2, ROWS, T), f32),  # the step's one-hot labels, a class a row
          plgpu.SMEM((2, 2, ROWS, T), f32),  # partial logits, by step parity
          plgpu.SMEM((2, CLASSES, T), f32),  # the logits, a class a row
          plgpu.SMEM((2, BATCH), f32),  # the step's per-row loss and correct flags
          plgpu.Barrier(num_barriers=MBARRIERS + 4 if ahead else MBARRIERS),
          plgpu.Barrier(num_arrivals=2),  # both warpgroups' partial logits stored
          plgpu.Barrier(),  # the peer CTA's in (the first warpgroup met it)
          plgpu.ClusterBarrier(collective_axes=("half",), num_barriers=2),
      ] + ([plgpu.Barrier(num_arrivals=2, num_barriers=2)] if ahead else [])  # x's slots free
      + descriptors.scratch(fresh))  # (``FRESH_DESCRIPTORS``)


def pack(params, lrs):
  """Stacked params [{"w": (P, 784, 256), "b": (P, 256)}, {"w": (P, 256, 10), "b": (P, 10)}]
  and learning rates (P,) as the kernel's W0^T (P, 2, 2, 64, 832), W1's rows (P, 2, 2, 16, 64)
  and small rows (P, 16, 64)."""
  w0, b0 = params[0]["w"], params[0]["b"]
  members = w0.shape[0]
  w0p = jnp.concatenate([w0, b0[:, None, :]], axis=1)  # b0 as input 784's row
  w0p = jnp.pad(w0p, ((0, 0), (0, INPUTS - 785), (0, 0)))
  w0t = jnp.swapaxes(w0p, 1, 2).reshape(members, 2, BLOCKS, T, INPUTS)
  w1 = jnp.swapaxes(params[1]["w"], 1, 2)  # (P, 10, 256)
  w1 = jnp.pad(w1, ((0, 0), (0, ROWS - CLASSES), (0, 0)))
  w1 = w1.reshape(members, ROWS, 2, BLOCKS, T).transpose(0, 2, 3, 1, 4)
  small = jnp.concatenate([params[1]["b"], jnp.asarray(lrs, jnp.float32)[:, None],
                           jnp.zeros((members, ROWS - CLASSES - 1), jnp.float32)], axis=1)
  small = jnp.broadcast_to(small[:, :, None], (members, ROWS, T))
  return w0t, w1, small


def unpack(w0t, w1, small):
  """``pack``'s inverse (the learning rates dropped)."""
  members = w0t.shape[0]
  w0p = jnp.swapaxes(w0t.reshape(members, HIDDEN, INPUTS), 1, 2)
  w1 = w1.transpose(0, 3, 1, 2, 4).reshape(members, ROWS, HIDDEN)[:, :CLASSES]
  return [{"w": w0p[:, :784], "b": w0p[:, 784]},
          {"w": jnp.swapaxes(w1, 1, 2), "b": small[:, :CLASSES, 0]}]


def batches(x, labels, orders, steps: int):
  """x (N, 784) uint8 and labels (N,) gathered by ``orders`` (D, >= steps * 64): pixels
  (D, steps, 64, 832) bfloat16 (integers; input 784 is 255, b0's), one-hot labels
  (D, steps, 16, 64) float32, a class a row."""
  idx = orders[:, :steps * BATCH]
  d = idx.shape[0]
  # The images padded once (N rows), then their rows gathered: padding after the gather wrote
  # every member's batches twice and took 14.9 ms of a 75.0 ms epoch at 64 members (an H200)
  xp = jnp.concatenate([x.astype(jnp.bfloat16), jnp.full((x.shape[0], 1), 255, jnp.bfloat16),
                        jnp.zeros((x.shape[0], INPUTS - 785), jnp.bfloat16)], axis=1)
  xs = xp[idx].reshape(d, steps, BATCH, INPUTS)
  onehot = jax.nn.one_hot(labels[idx], ROWS, dtype=jnp.float32).reshape(d, steps, BATCH, ROWS)
  return xs, jnp.swapaxes(onehot, 2, 3)


def train_steps(params, lrs, xs, onehot, profile_dir: str | None = None, parts: str = "all",
                fresh_descriptors: bool | None = None, interpret: tuple | None = None,
                ahead: str | bool | None = None, reverse_odd: bool | None = None):
  """``steps`` SGD steps of every member in one launch: stacked params and lrs as ``pack``
  takes them, xs and onehot from ``batches`` (D = 1: every member on the same batches; D = P:
  each its own). Returns (params, losses (P, steps), correct (P, steps) int32). Hopper only.
  ``profile_dir``: a Mosaic GPU profiler trace of the launch's scopes goes there. ``parts``:
  "all"; "walk" or "outputs" runs only the walks over W0 or only the output layer (wrong
  numbers: what each costs alone, ``probes.stream_population --floor``).
  ``fresh_descriptors`` (default ``FRESH_DESCRIPTORS``) builds each product's operand
  descriptors where it runs. ``interpret``: None (compiled), else the items of Mosaic GPU's
  ``InterpretGPUParams`` (jax 0.12, with ``tests/mgpu_interpreter.py``'s additions: a CPU
  run). ``ahead`` (True, "start", "store" or False: ``AHEAD``'s form and where it fetches,
  True the module's ``AHEAD_AT``; default ``AHEAD``) and ``reverse_odd`` (default ``REVERSE_ODD``):
  the forms of those names."""
  members, steps, shared = params[0]["w"].shape[0], xs.shape[1], xs.shape[0] == 1
  if not shared and xs.shape[0] != members:
    raise ValueError(f"batches for 1 or {members} members, got {xs.shape[0]}")
  ahead = AHEAD if ahead is None else ahead
  ahead = (AHEAD_AT if ahead is True else ahead) or None
  if ahead not in (None, "start", "store"):
    raise ValueError(f"ahead: 'start', 'store' or False, not {ahead!r}")
  w0t, w1, small = pack(params, lrs)
  fresh = FRESH_DESCRIPTORS if fresh_descriptors is None else fresh_descriptors
  reverse_odd = REVERSE_ODD if reverse_odd is None else reverse_odd
  w0t, w1, small, metrics = _call(members, steps, shared, profile_dir, parts, fresh, interpret,
                                  ahead, reverse_odd)(
      w0t, w1, small, xs, onehot)
  losses = jax.vmap(jax.vmap(common.fixed_order_mean))(metrics[:, :, 0])
  correct = jnp.sum(metrics[:, :, 1], axis=2).astype(jnp.int32)
  return unpack(w0t, w1, small), losses, correct


def reference(params, lrs, xs, onehot):
  """The plain-jnp twin of ``train_steps`` at the params' dtype: the same steps, products at
  full precision, the logits as half 0's units then half 1's, then b1."""
  hi = lax.Precision.HIGHEST
  dt = params[0]["w"].dtype
  shared = xs.shape[0] == 1

  def member(w0, b0, w1, b1, lr, xs, onehot):
    w0p = jnp.pad(jnp.concatenate([w0, b0[None]], axis=0), ((0, INPUTS - 785), (0, 0)))

    def step(carry, xy):
      w0p, w1, b1 = carry
      x, y = xy
      x, y = x.astype(dt), y[:CLASSES].T.astype(dt)
      z = jnp.dot(x, w0p, precision=hi) * (1.0 / 255.0)
      hid = jnp.maximum(z, 0.0)
      half = HIDDEN // 2
      logits = (jnp.dot(hid[:, :half], w1[:half], precision=hi)
                + jnp.dot(hid[:, half:], w1[half:], precision=hi)) + b1
      top = jnp.max(logits, axis=1)
      e = jnp.exp(logits - top[:, None])
      total = jnp.sum(e, axis=1)
      picked = jnp.sum(y * logits, axis=1)
      dl = (e / total[:, None] - y) * (1.0 / BATCH)
      dz = jnp.where(z > 0, jnp.dot(dl, w1.T, precision=hi), 0.0)
      w0p = w0p - lr * (jnp.dot(x.T, dz, precision=hi) * (1.0 / 255.0))
      w1 = w1 - lr * jnp.dot(hid.T, dl, precision=hi)
      b1 = b1 - lr * jnp.sum(dl, axis=0)
      loss = jnp.mean(jnp.log(total) + top - picked)
      return (w0p, w1, b1), (loss, jnp.sum(jnp.where(picked >= top, 1, 0)))

    (w0p, w1, b1), (losses, correct) = lax.scan(step, (w0p, w1, b1), (xs, onehot))
    return w0p[:784], w0p[784], w1, b1, losses, correct

  data_axis = None if shared else 0
  w0, b0, w1, b1, losses, correct = jax.vmap(
      member, in_axes=(0, 0, 0, 0, 0, data_axis, data_axis))(
          params[0]["w"], params[0]["b"], params[1]["w"], params[1]["b"],
          jnp.asarray(lrs, dt), xs[0] if shared else xs, onehot[0] if shared else onehot)
  return ([{"w": w0, "b": b0}, {"w": w1, "b": b1}], losses,
          correct.astype(jnp.int32))

