"""Rows of shared memory pushed to other CTAs of a thread-block cluster (Hopper, Pallas Mosaic GPU).

A cluster's CTAs can exchange data two ways. Pulled: each writes its rows to its own shared
memory, all meet at a cluster barrier, then each reads its peers' memory (``plgpu.cluster_ref``):
two waits on the cluster network, the barrier's and the reads'. Pushed (this module): the sender
copies a row into the receiver's shared memory with the copy engine (``cp.async.bulk``), and the
copy completes on an mbarrier in the receiver's memory, which the receiver waits on; then it
reads its own memory. One wait, and no cluster barrier. cluster_mlp_mgpu's two exchanges (ten
columns of 64 floats to ten CTAs, then one column from each of those to all 16) measured faster
pushed than pulled (``probes.cluster_exchange --mlp``; docs/design/cluster_kernels.md).

Pallas has no push of a shared-memory row to a peer, so the three pieces are PTX, emitted
through ``plgpu.inline_mgpu``:

  init       every thread of the CTA, once, before any push: one thread sets up the mbarriers,
             then the whole cluster meets (peers must not signal a barrier before it exists)
  push       one thread: for the receiving CTA, arrive on its mbarrier expecting the row's
             bytes, then copy the row into its memory at this CTA's row (so a receiver's buffer
             holds one row a sender); the copy's completion counts the bytes off
  scatter,   the same for several receivers, spread over the warpgroup's four warps (one lane
  broadcast  each): row k to CTA k, or one row to CTAs 0 .. n - 1. Issued by one thread, 16
             pushes go out one after another; by four warps, four at a time (a faster
             cluster_mlp_mgpu step)
  wait       every thread: spin on the mbarrier's phase (the step's parity)

An mbarrier with ``n`` senders completes a phase when all ``n`` have arrived and all their
bytes have landed, so the receiver never arms it. The sender's rows must be visible to the
copy engine first (``plgpu.commit_smem``: a proxy fence and a barrier of the warpgroup). Reuse
is the caller's to order: a sender may push the next step's row only once the receiver has read
the last (in cluster_mlp_mgpu every exchange waits on one that follows the reads). The mbarriers'
default semantics are enough: the data comes with the copy, not with the arrival. Marking the
arrival ``.release.cluster`` made a probe's step many times slower.

GPU only: Mosaic GPU's interpreter cannot run PTX, so kernels keep a pulled form for it.
"""

from __future__ import annotations

BARRIER_BYTES = 8  # An mbarrier is 8 bytes; the caller's ref holds them side by side.


def _asm(text: str, *args):
  """``text`` as inline PTX with side effects; ``args`` are i32 (``r``) or i1 (``b``) values.
  (Mosaic GPU's ``utils.inline_ptx`` does the same from jax 0.11 on; jax 0.10 has none.)"""
  from jax._src.lib.mlir import ir
  from jax._src.lib.mlir.dialects import llvm
  kinds = ["b" if ir.IntegerType(a.type).width == 1 else "r" for a in args]
  llvm.inline_asm(ir.Type.parse("!llvm.void"), list(args), text, ",".join(kinds),
                  has_side_effects=True)


def _address(ref, offset: int = 0):
  """The 32-bit shared-memory address of ``ref`` (a Mosaic GPU memref) plus ``offset`` bytes."""
  from jax._src.lib.mlir import ir
  from jax._src.lib.mlir.dialects import arith, llvm
  from jax.experimental.mosaic.gpu import utils as mu
  i32 = ir.IntegerType.get_signless(32)
  return arith.addi(llvm.ptrtoint(i32, mu.memref_ptr(ref)), mu.c(offset, i32))


def _one_thread(scope):
  from jax.experimental.mosaic.gpu import utils as mu
  return mu.single_thread_predicate(getattr(mu.ThreadSubset, scope))


def init(bars, senders) -> None:
  """Sets up one mbarrier per entry of ``senders`` (how many CTAs push to it each phase) in
  ``bars``, then meets the whole cluster. Every thread of every CTA calls it, once."""
  from jax.experimental.pallas import mosaic_gpu as plgpu

  @plgpu.inline_mgpu(arg_types=(plgpu.RefType(),))
  def emit(ctx, bars):
    one = _one_thread("BLOCK")
    for i, n in enumerate(senders):
      _asm(f"@$0 mbarrier.init.shared::cta.b64 [$1], {n};", one, _address(bars, BARRIER_BYTES * i))
    _asm("@$0 fence.mbarrier_init.release.cluster;", one)
    _asm("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;")
  emit(bars)


def _copy_to_peer(pred: str, bar: str, dst: str, cta: str, src: str, nbytes: int) -> list[str]:
  """The PTX of one push, where predicate ``pred`` holds: map this CTA's addresses ``bar`` (the
  mbarrier) and ``dst`` (into registers bar and dst) to CTA ``cta``'s, arrive on its mbarrier
  expecting ``nbytes``, and copy ``nbytes`` from ``src`` there, completing on that mbarrier."""
  return [f"mapa.shared::cluster.u32 bar, {bar}, {cta};",  # the same addresses in CTA cta
          f"mapa.shared::cluster.u32 dst, {dst}, {cta};",
          f"@{pred} mbarrier.arrive.expect_tx.shared::cluster.b64 _, [bar], {nbytes};",
          f"@{pred} cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"
          f" [dst], [{src}], {nbytes}, [bar];"]


def push(row, inbox, bars, barrier: int, cta: int) -> None:
  """One thread of the warpgroup copies ``row`` (a 1-D shared-memory ref) into CTA ``cta``'s
  ``inbox`` (2-D, one row a sender) at this CTA's row, completing on ``cta``'s mbarrier
  ``barrier`` of ``bars``."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  nbytes = row.shape[0] * row.dtype.itemsize
  ptx = "\n".join(["{", ".reg .b32 bar, dst, me;", "mov.u32 me, %cluster_ctarank;",
                    f"mad.lo.u32 dst, me, {nbytes}, $2;",  # this CTA's row of the inbox
                    *_copy_to_peer("$0", "$1", "dst", str(cta), "$3", nbytes), "}"])

  @plgpu.inline_mgpu(arg_types=(plgpu.RefType(), plgpu.RefType(), plgpu.RefType()))
  def emit(ctx, row, inbox, bars):
    _asm(ptx, _one_thread("WARPGROUP"), _address(bars, BARRIER_BYTES * barrier),
         _address(inbox), _address(row))
  emit(row, inbox, bars)


def _push_spread(src, stride: int, inbox, bars, barrier: int, count: int) -> None:
  """For each peer < count: one ``inbox`` row's bytes, from ``src`` + peer * ``stride`` bytes,
  into CTA peer's ``inbox`` at this CTA's row, completing on peer's mbarrier ``barrier``. Lane 0
  of warp w (of the warpgroup's four) pushes to peers w, w + 4, ..."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  nbytes = inbox.shape[1] * inbox.dtype.itemsize
  lines = ["{", ".reg .b32 w, peer, src, bar, dst, mine;", ".reg .pred p, lead;",
           "mov.u32 w, %tid.x;", "and.b32 peer, w, 31;", "setp.eq.u32 lead, peer, 0;",
           "shr.u32 w, w, 5;", "and.b32 w, w, 3;",  # this warp of the warpgroup
           "mov.u32 mine, %cluster_ctarank;", f"mad.lo.u32 mine, mine, {nbytes}, $1;"]
  for first in range(0, count, 4):
    lines += [f"add.u32 peer, w, {first};",
              f"setp.lt.and.u32 p, peer, {count}, lead;",
              f"mad.lo.u32 src, peer, {stride}, $2;",
              *_copy_to_peer("p", "$0", "mine", "peer", "src", nbytes)]
  ptx = "\n".join(lines + ["}"])

  @plgpu.inline_mgpu(arg_types=(plgpu.RefType(), plgpu.RefType(), plgpu.RefType()))
  def emit(ctx, src, inbox, bars):
    _asm(ptx, _address(bars, BARRIER_BYTES * barrier), _address(inbox), _address(src))
  emit(src, inbox, bars)


def scatter(rows, inbox, bars, barrier: int) -> None:
  """Row k of ``rows`` (2-D, shared memory) to CTA k's ``inbox`` at this CTA's row, for every
  row, completing on CTA k's mbarrier ``barrier``: four pushes at a time (``_push_spread``).
  Every thread of the warpgroup calls it."""
  _push_spread(rows, rows.shape[1] * rows.dtype.itemsize, inbox, bars, barrier, rows.shape[0])


def broadcast(row, inbox, bars, barrier: int, ctas: int) -> None:
  """``row`` to CTAs 0 .. ctas - 1, into each one's ``inbox`` at this CTA's row, completing on
  its mbarrier ``barrier``: four pushes at a time. Every thread of the warpgroup calls it."""
  _push_spread(row, 0, inbox, bars, barrier, ctas)


def wait(bars, barrier: int, parity: int) -> None:
  """Every thread waits until mbarrier ``barrier`` of ``bars`` completes its phase of
  ``parity`` (0 for the first phase, then alternating)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  ptx = ("{\n.reg .pred done;\nWAIT:\n"
         f"mbarrier.try_wait.parity.shared::cta.b64 done, [$0], {parity};\n"
         "@!done bra WAIT;\n}")

  @plgpu.inline_mgpu(arg_types=(plgpu.RefType(),))
  def emit(ctx, bars):
    _asm(ptx, _address(bars, BARRIER_BYTES * barrier))
  emit(bars)
