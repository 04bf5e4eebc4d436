"""The MLP's epoch in one thread-block cluster (Pallas Mosaic GPU, Hopper).

The network is 784 -> 256 (ReLU) -> 10 with biases, softmax cross-entropy and plain SGD,
batch 64: the project's MLP reference workload (wider hidden layers, batches of 128 to 512:
below). One launch runs every step of an epoch in
one cluster of 16 CTAs, two warpgroups each. CTA c owns hidden units 16c .. 16c + 15: its
columns of W0 (kept in shared memory for the whole launch, in thirteen tiles of 64 inputs; at
tf32 and bfloat16 also in registers, below), with b0 as W0's row 784 (the images' input 784 is
255, so x W0 / 255 adds b0, and that row's update is b0's), and its rows of W1 (in registers).
b1 is held by every CTA and updated the same way everywhere. A step, in each CTA:

  forward    z = x W0[:, units] / 255, a (64, 16) wgmma product over the 785 inputs (padded to
             832): W0's tiles 0 .. 4 by the first warpgroup, 5 .. 12 by the second (its part
             of z handed over in shared memory); h = relu(z); its partial logits, for each
             class k the sum over its units of h times W1[units, k], into its shared memory,
             class by class
  exchange 1 each CTA pushes its column of class k to CTA k < 10 (``cluster_push.scatter``: a
             copy into the peer's shared memory, four warps issuing them); CTA k adds the 16 in
             CTA order and adds b1[k]
  exchange 2 CTA k pushes class k's logits to every CTA (``cluster_push.broadcast``); each takes
             the softmax, the loss and dL/dlogits itself (the same bits everywhere)
  backward   dh = dL/dlogits W1[units]^T, dz = dh [z > 0]; dW1 and db1, sums over the batch, as
             one small wgmma product (``small_grads``); dW0 = x^T dz / 255 as thirteen (64, 16)
             wgmma products, a loop over W0's tiles, each updated as soon as its product is done:
             tiles 0 .. 4 by the first warpgroup (after the small product), 5 .. 12 by the
             second

The first warpgroup runs the steps. The second owns W0's tiles 5 .. 12: once dz's parts are
written (a barrier of the CTA) it updates them, then takes their part of the next step's
forward product as soon as the next batch's tiles are in, and hands it over (another barrier).
So W0's update and the forward are split between the two. Pallas is told not to put a
barrier of the warpgroup around every store to shared memory (``unsafe_no_auto_barriers``;
about 190 a step, counted in the code): the kernel has one wherever a thread reads what another
wrote (``sync``), with a proxy fence (``commit_smem``) where the tensor cores or a copy read
what threads wrote.

Products keep float32's accuracy in bfloat16, exactly: the images' pixels are integers
0..255 (exact in bfloat16; the 1/255 is applied to the float32 sums), and W0 and dz are
each split into three bfloat16 parts (8 + 8 + 8 bits of float32's 24:
``split3``), so every product of the tensor cores is exact and only their float32
sums round. The parts sit side by side in shared memory (W0's as (832, 48), dz's as (64, 48)),
so one wgmma of N = 48 takes all three and reads x once; the three 16-column groups of its
result are added after. At reduced precision the products take fewer parts (``PARTS``: tf32
two, bfloat16 one); W0 itself is kept as all three parts, its float32 value exactly: the
update adds them up, and stores the new value's three parts. At tf32 and bfloat16 each
warpgroup holds its tiles' float32 values in registers instead (a tile is 8 values a thread,
in the layout of its update's product), so an update loads nothing and stores only the parts
the products take (all three in the last step); at float32 ptxas would spill. bfloat16 wgmma
takes x transposed from shared memory, so x^T is never formed.

The batch comes by TMA in thirteen tiles of 64 inputs, each on a barrier of its own: the next
step's tile j is fetched as soon as the backward's tile j is done with it, so the copy runs
behind the backward, and the forward waits for each tile just before its product.
The exchanges are small (class k's 64 partial logits from each CTA; then the 10 columns of
logits) and wait on nothing but their data: no cluster barrier in the step (pulled through one,
with reads of the peers' memory, they made the step slower). One inbox each is enough:
a CTA pushes a step's columns only after it has the last step's logits, which their CTAs sent
only after reading their inbox. Shared memory is the limit (x 104 KB, W0's parts 78 KB, and
Mosaic GPU rounds every buffer up to 1 KB; about 2 KB is left): the small products' operands,
their sums and the second warpgroup's part of z take turns in one memory (a ``RefUnion``).
CTA 0 writes each step's per-row losses and correct flags; they are added up after the launch
in a fixed order.

A batch of 128 or 256 rows (``BATCHES``) runs as two or four passes of 64 at the same weights
(``passes``): each pass is the step above with dL/dlogits scaled by 1/(64 passes), except that
its gradients are added to the sums of the step's earlier passes (W0's tiles in registers,
W1's and b1's in their rows of the small parameters' shared memory, which hold nothing else
between the launch's first and last step) and only the last pass updates the weights. x's
64 rows fill the shared memory, so the rows cannot all be in at once; a pass costs about a
step of 64 rows (docs/design/cluster_kernels.md).

At batch 256 and 512 (``ROWGROUPS``) a 256-unit network's step takes four clusters of the same
units (``rowgroups``), each running a quarter of the step's passes at the same weights. In a
step's last pass each CTA stages its W0 tiles' pass sums in x's own tile memory (a ``RefUnion``:
x's rows are done with by then) and sends each to global memory as soon as its tile is done;
then the clusters add their sums in two rounds (``combine``): in round r each CTA meets the
others at a grid barrier (one a warpgroup: their tiles are apart), reads the sums of cluster
m ^ 2^r, adds them to its own (a + b: the same bits in both) and sends the result on: pairs,
then pairs of pairs, so every cluster ends with the same bits (W1's and b1's sums, in ``small``,
the same way). Then the weights are updated, and each x tile of the next step comes in as soon
as its sums are read. A round costs about a pass, so it pays from four passes on.

A population trains a cluster a network (``train_population``): the launch's grid holds one
cluster a member (Pallas Mosaic GPU's grid counts clusters), each reading its member's
parameters, batches and learning rate (row ROW_LR of its small parameters; the single network
takes it as a constant) by ``lax.axis_index("member")``; the clusters share nothing, and those
that do not fit on the GPU at once (an H100 holds 7) wait for one to finish.

A wider network, 784 -> 256 G -> 10 for G = 2 .. ``grid_barrier.resident_clusters()`` (7 on an
H100 SXM), trains a cluster a group of 256
units in one launch (``train_steps`` takes it by W0's width; ``split_groups``; a hidden layer
of another width is padded with units of zero weights, which stay zero: ``pad_hidden``): each
group's clusters read the same batches, and in exchange 1 each group's CTA k writes its class-k sum to
global memory, meets the other groups' class CTAs at a grid barrier
(``pallas_kernels.mgpu.grid_barrier``: all groups must be resident at once), and adds all G
sums in group order, then b1[k]; the rest of the step is the group's own. Every group computes
the same logits, losses and b1; the first group's CTA 0 writes the metrics. More groups than
the GPU holds clusters at once (``_flat``: 784-2048-10, 8 groups, on an H100 that holds 7) run
as groups x 16 CTAs without clusters, a CTA a SM, all resident; their first exchange goes
through global memory at three grid barriers a step (``exchange_global``: the same sums in the
same order).

Checked against ``reference`` in float64 over a whole MNIST epoch, and against train_step
(``experiments.check_kernels --only=cluster_mlp``). In every precision its epoch measured faster
than xla's scan and than the grid-barrier epoch kernel (``mlp_epoch``), so the trainer runs it
for this network on Hopper (``jaxshallow.fused.epoch``), with every supported jax (``semantics``). The
timings, the step's floor with the exchanges' share of it, and the compile's length are in
docs/design/cluster_kernels.md. ``reference`` is its plain-jnp twin; ``profile_dir`` times its
phases (``PHASES``, with one warpgroup) with Mosaic GPU's profiler; ``interpret=True`` runs it in
Mosaic GPU's interpreter with one warpgroup and the pulled exchanges (jax >= 0.11; jax 0.11.2's
needs a local patch for reads of a peer's shared memory).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.mgpu import cluster_push, grid_barrier, layout_search
from pallas_kernels.ops import dense_mgpu
from pallas_kernels.ops.dense_mgpu import load as _load, store as _store

BATCH = 64  # wgmma's M: one warpgroup's rows.
# Batches a single network trains at (``problem``'s ``wide``): 64 P rows in P passes of 64, the
# gradients added up over the passes and the weights updated in the last pass.
BATCHES = (64, 128, 256, 512)
# Batches at which a 256-unit network's step runs in several clusters, its passes split between
# them (``rowgroups``, ``rowgroups_for``; the clusters' sums added through global memory in
# ``combine``'s rounds, about a pass's cost each). H100, jax 0.11.2, ms an epoch of 60,000
# random rows in Lane semantics (a probe's short compile; docs/bench/2026-11-27p_four_clusters):
# batch 256 in one cluster 7.62, two 4.78, four 4.37; batch 512 in two 4.20, four 3.88. The
# grid's MNIST epochs in Warpgroup semantics (jax 0.11's): 256 in four 3.56, 512 3.16. jax
# 0.12.0.1 (Lane, its semantics; docs/bench/2026-11-28a_four_clusters_jax012): 256 in one 7.43,
# four 4.11; 512 in four 3.42.
ROWGROUPS = {256: 4, 512: 4}
# The jax versions whose networks of more groups than clusters (``_flat``: 784-2048-10 on an
# H100) were checked on a GPU against float64 (docs/bench/2026-11-28d_flat_2048: 0.11.2 and
# 0.12.0.1, 9.0e-7 from float64 over 20 steps in both, the same bits twice).
FLAT_CHECKED = ((0, 11), (0, 12))
INPUTS = 784
SPLIT = 5  # W0's tiles 0 .. 4 are the first warpgroup's, 5 .. 12 the second's
# With passes > 1, by the parts the products take (float32 3, tf32 2, bfloat16 1): the split
# of W0's tiles, and whether W0's float32 values are held in registers. Each pass's gradient
# sums take registers too, and ptxas spilled; the fastest of those tried at batch 128 on the
# H100 (jax 0.11.2, ms an epoch, docs/design/cluster_kernels.md): float32 splits 1-5 7.89 /
# 7.76 / 7.47 / 8.03 / 8.83 (batch 256: 2-4 7.20 / 6.61 / 7.81); tf32 2-4 without W0 in
# registers 7.09 / 6.50 / 6.45, 5 with 7.90; bfloat16 3-4 without 6.39 / 5.99, 5 with 5.68.
PASS_SPLIT = {3: 3, 2: 4, 1: 5}
PASS_REGISTERS = {3: False, 2: False, 1: True}
PADDED = 832  # 13 tiles of 64 inputs (the backward's wgmma M); input 784 is b0's (x = 255).
TILES = PADDED // 64
HIDDEN = 256  # A cluster's units: a wider network takes one cluster per 256 (``groups``).
CTAS = 16  # The largest cluster Hopper launches.
UNITS = HIDDEN // CTAS
CLASSES = 10
LANES = 16  # Classes padded to a wgmma N.
# A CTA's small parameters, one (16,) row each: W1[units, k] for the 10 classes, and b1 in the
# last row (the padded classes' rows are zeros).
ROW_B1 = LANES - 1
ROW_LR = LANES - 2  # A population's: each network's learning rate, in every column
SMALL_ROWS = LANES
ONES = CLASSES  # The column of ones beside dL/dlogits in the small products (a padded class).
PARTS = {"float32": 3, "tf32": 2, "bfloat16": 1}  # bfloat16 parts of W0 and dz in the products
PHASES = ("forward", "partials", "exchange_1", "sum_class", "exchange_2", "read_logits",
          "softmax", "backward_small", "backward_w0")  # Mosaic GPU profiler scopes


def lowers() -> str | None:
  """Why this jax cannot compile the kernel (one line), or None if it can. Every supported jax
  can: see ``semantics``."""
  return None


def semantics():
  """The Mosaic GPU lowering semantics the kernel is compiled in, the faster epoch of the two
  in each jax measured on the H100 (one process, the same bits; docs/bench/2026-11-27g_jax012):
  jax 0.11: Warpgroup (its default), 6.75 ms against Lane's 6.98 (784-256-10; compile 7.8 s
  against 3.6); jax 0.12: Lane, 6.73 ms against Warpgroup's 6.83 (compile 3.1 s against 4.9).
  jax 0.11's Warpgroup also at batch 256, 512 and 784-2048-10 (Lane 2-9 % slower there, one H100,
  docs/bench/2026-12-06a_h100). jax 0.10: Lane (its default; not run on a GPU)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  if _jax_version() == (0, 11):
    return plgpu.LoweringSemantics.Warpgroup
  return plgpu.LoweringSemantics.Lane


def checked_batches() -> tuple[int, ...]:
  """The batches this jax trains at, those checked on the H100 against float64 with it
  (``check_kernels --only=cluster_mlp``, ``ROWGROUPS``' four clusters included): every one of
  ``BATCHES`` with jax 0.11 and 0.12; 64 with jax 0.10 until a GPU run checks the others there."""
  return BATCHES if _jax_version() in ((0, 11), (0, 12)) else (BATCH,)


def _rowgroups_fit(batch: int) -> bool:
  """Whether this GPU holds ``ROWGROUPS``' clusters for ``batch`` at once (their grid barrier
  opens only then: ``grid_barrier.resident_clusters``)."""
  return ROWGROUPS.get(batch, 1) <= grid_barrier.resident_clusters()


def rowgroups_for(hidden: int, batch: int) -> int:
  """The clusters a step of ``batch`` rows of a network of ``hidden`` units takes: ``ROWGROUPS``
  for a network of one cluster of units on a GPU that holds them at once; else one (its passes
  in one cluster). Which jax trains which batch at all is ``checked_batches``' choice."""
  if _groups(hidden) > 1 or not _rowgroups_fit(batch):
    return 1
  return ROWGROUPS.get(batch, 1)


_jax_version = common.jax_version  # What ``semantics`` and ``checked_batches`` choose by


def _rounds(rowgroups: int) -> int:
  """The exchanges of ``combine`` for ``rowgroups`` clusters (1, 2 or 4): pairs, then pairs of
  pairs."""
  return rowgroups.bit_length() - 1


def _groups(hidden: int) -> int:
  """The clusters a hidden layer of ``hidden`` units takes: 256 units each, the last padded."""
  return -(-hidden // HIDDEN)


def _flat(groups: int) -> bool:
  """Whether a network of ``groups`` x 256 units trains without clusters (``flat``): more
  groups than the GPU holds clusters of 16 at once (an H100 holds 7, 1,792 units), whose CTAs
  exchange through global memory instead, all ``groups`` x 16 resident at once."""
  return groups > grid_barrier.resident_clusters()


def _most_groups() -> int:
  """The most groups of 256 units a network takes: in clusters, or beyond them without
  (``_flat``: a CTA a SM, 8 on an H100's 132 SMs)."""
  return max(grid_barrier.resident_clusters(), grid_barrier.resident_ctas() // CTAS)


def problem(widths, batch: int, *, bias: bool, optimizer: str, dtype,
            wide: bool = False) -> str | None:
  """Why this kernel cannot train the network (one line), or None if it can. ``wide`` (a single
  network): any hidden width up to ``_most_groups()`` groups of 256 units (``pad_hidden``;
  beyond ``grid_barrier.resident_clusters()`` without clusters, at batch 64 and with the jax
  versions of ``FLAT_CHECKED``) and any batch of ``BATCHES``; else (a population's member) 256
  and 64."""
  hidden = tuple(widths)[1] if len(widths) == 3 else 0
  most = HIDDEN * (_most_groups() if wide else 1)
  if tuple(widths) != (INPUTS, hidden, CLASSES) or not (1 <= hidden <= most if wide
                                                        else hidden == HIDDEN):
    units = f"(1 .. {most})" if wide else f"{HIDDEN}"
    return (f"it trains {INPUTS}-{units}-{CLASSES} networks, not "
            f"{'-'.join(map(str, widths))}")
  batches = checked_batches() if wide else (BATCH,)
  if batch not in batches:
    return f"it takes batch {' or '.join(map(str, batches))}, not {batch}"
  if batch > 256 and hidden > HIDDEN:
    return f"it takes batch {batch} at up to {HIDDEN} hidden units, not {hidden}"
  flat = _flat(_groups(hidden))
  if flat and batch > BATCH:
    return (f"it takes batch {BATCH} at more than "
            f"{HIDDEN * grid_barrier.resident_clusters()} hidden units, not {batch}")
  if flat and _jax_version() not in FLAT_CHECKED:
    return (f"it takes more than {HIDDEN * grid_barrier.resident_clusters()} hidden units with "
            f"jax {' or '.join('.'.join(map(str, v)) for v in FLAT_CHECKED)} (checked on a GPU),"
            f" not {jax.__version__}")
  if batch > 256 and not _rowgroups_fit(batch):
    return f"it takes batch {batch} in {ROWGROUPS[batch]} clusters, more than this GPU holds"
  if not bias:
    return "it has biases"
  return common.sgd_float32_problem(optimizer, dtype)


def by_parity(parity, fn) -> None:
  """``fn(0)`` or ``fn(1)`` by the step's parity (a traced value), for what takes it as a
  constant (an mbarrier's phase in PTX, a barrier's index)."""
  pl.when(parity == 0)(lambda: fn(0))
  pl.when(parity == 1)(lambda: fn(1))


def _kernel(w0p_in, small_in, eye_in, x_in, onehot_in,  # inputs (global memory)
            w0p_out, small_out, metrics_out,  # outputs
            *refs,  # (groups > 1: the groups' class sums, an output) and the scratch
            steps: int, lr: float | None, parts: int, unroll: bool, warpgroups: int, split: int,
            ptx: bool, registers: bool, groups: int = 1, passes: int = 1, rowgroups: int = 1,
            flat: bool = False, exchanges: bool = True):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  # (flat: the CTAs' partial logits, the groups' class sums and the logits, through global
  # memory: ``exchange_global``.)
  group_sums, refs = ((refs[:3], refs[3:]) if flat else (refs[0], refs[1:]) if groups > 1
                      else (None, refs))
  # (rowgroups > 1: the clusters' pass sums, outputs; x's memory also their staging; the
  # partner cluster's small rows.)
  row_sums, row_small, refs = ((refs[0], refs[1], refs[2:]) if rowgroups > 1
                               else (None, None, refs))
  (x, w0p, backward_buffers, dzp, onehot, eye, small, met, tma, x_tiles, dz_ready, w0_done,
   small_done, barrier, columns, inbox, logits_in, *other_small) = refs
  x, stage = x if rowgroups > 1 else (x, None)
  f32 = jnp.float32
  # On the GPU in Warpgroup semantics, 1-D loads with their layouts given (``dense_mgpu.load``).
  load = functools.partial(_load, layout_given=ptx
                           and semantics() == plgpu.LoweringSemantics.Warpgroup)
  by_row = plgpu.Layout.WGMMA.reduce(1)  # (64,): one value a batch row
  by_col = plgpu.Layout.WGMMA.reduce(0)  # (16,): one value a unit (or a class)
  c = lax.axis_index("cta")

  def pass_of(s):  # Whether step s (of 64 rows) is the first and the last pass of its batch
    p = lax.rem(s, rows_passes)  # (this cluster's passes of it)
    return p == 0, p == rows_passes - 1

  def choose(pred, a, b):  # jnp.where of a scalar predicate (broadcast: Mosaic GPU asks for it)
    return jnp.where(jnp.broadcast_to(pred, a.shape), a, b)
  # The network this cluster trains (one, or a population's); with groups > 1, the cluster's
  # group of 256 units of one network, whose batches (and losses) are the groups' one.
  m = lax.axis_index("member")
  data = 0 if groups > 1 or rowgroups > 1 else m  # The batches' (and metrics') member
  # With rowgroups > 1 each cluster takes ``rows_passes`` of a step's passes (the same units in
  # every cluster): its step s is the batches' pass ``batch_pass(s)``.
  rows_passes = passes // rowgroups
  rounds = _rounds(rowgroups)

  def batch_pass(s):
    if rowgroups == 1:
      return s
    return lax.div(s, rows_passes) * passes + m * rows_passes + lax.rem(s, rows_passes)
  if groups > 1:
    counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))  # The grid barrier's arrivals
  if rowgroups > 1:  # Each warpgroup's own grid barrier (their tiles are apart)
    counter = pl.get_global(plgpu.SemaphoreType.REGULAR((2,)))
  used = pl.ds(0, UNITS * parts)  # The parts' columns the products take.
  # The small products' operands, then their sums, then the second warpgroup's part of z take
  # turns in one memory, so that x, W0 and the rest fit in the 227 KB of shared memory.
  (lhs, rhs), sums, zb = backward_buffers

  def split3(a):  # Three bfloat16 parts that add up to a exactly
    return dense_mgpu.split3_in_kernel(a, ptx)

  def rows(v):  # (64,) -> (64, 16): v down the rows
    return lax.broadcast_in_dim(v, (BATCH, LANES), [0])

  def cols(v):  # (16,) -> (64, 16): v along the columns
    return lax.broadcast_in_dim(v, (BATCH, LANES), [1])

  def entry(v, k):  # v[k] in every row (k may be traced): (16,) by_col -> (64,) by_row
    return jnp.sum(cols(v * load(eye.at[k], by_col)), axis=1)

  def tile(j):  # Inputs 64j .. 64j + 63.
    return pl.ds(64 * j, 64)

  def over_tiles(body, first=0, last=TILES):  # body(j) for the input tiles first .. last - 1
    # A loop on the GPU: unrolled, ptxas spilled, and the forward's and the backward's tiles ran
    # slower (docs/design/cluster_kernels.md). Mosaic GPU's interpreter (jax 0.11.2) hangs on a
    # loop inside the step loop (cause not found), so it runs the same tiles unrolled.
    if unroll:
      for j in range(first, last):
        body(j)
    else:
      def loop_body(j, carry):
        body(j)
        return carry
      lax.fori_loop(first, last, loop_body, 0)

  def w0_part(j, p):  # Part p of W0's tile j, in shared memory.
    return w0p.at[tile(j), pl.ds(UNITS * p, UNITS)]

  def w0_tile(j):  # W0's tile j in float32: its three parts added up, exactly
    return functools.reduce(jnp.add, [load(w0_part(j, p), plgpu.Layout.WGMMA).astype(f32)
                                      for p in range(3)])

  def part_sum(a):  # (64, 16 parts) -> (64, 16): the products of the parts added up
    return functools.reduce(jnp.add, [a[:, UNITS * p:UNITS * (p + 1)] for p in range(parts)])

  def fetch_x(s, j):  # Tile j of step s's pixels (integers, in bfloat16), on its own barrier.
    plgpu.copy_gmem_to_smem(x_in.at[data, batch_pass(s), :, tile(j)], x.at[j], x_tiles.at[j])

  bars = logits_in.at[CLASSES]  # The two mbarriers the pushes complete on (``ptx``)
  if ptx and not flat:
    cluster_push.init(bars, (CTAS, CLASSES))  # the columns from 16 CTAs; the logits from 10

  def sync():  # A barrier of the warpgroup without a proxy fence (``warpgroup_sync``).
    dense_mgpu.warpgroup_sync(ptx)

  def meet(i):  # A barrier of the whole cluster.
    sync()  # Every thread's stores before the arrivals (by one thread a peer).
    plgpu.barrier_arrive(barrier.at[i])
    plgpu.barrier_wait(barrier.at[i])

  def start():  # The launch's inputs. W0 comes as its three bfloat16 parts, its float32 value.
    plgpu.copy_gmem_to_smem(w0p_in.at[m, c], w0p, tma.at[0])
    plgpu.copy_gmem_to_smem(eye_in, eye, tma.at[1])
    plgpu.copy_gmem_to_smem(small_in.at[m, c], small, tma.at[2])
    plgpu.copy_gmem_to_smem(onehot_in.at[data, batch_pass(0)], onehot, tma.at[3])
    for j in range(TILES):
      fetch_x(0, j)
    for i in range(3):
      plgpu.barrier_wait(tma.at[i])
    w1 = tuple(load(small.at[k], by_col) for k in range(CLASSES))  # W1[units, k]
    b1 = load(small.at[ROW_B1], by_col)
    return w1, b1, held(0, split), pass_sums(0, split)

  def small_grads(h, dlogits):
    """dW1[units] (a (16,) row a class) and db1: sums over the batch rows, on the tensor
    cores (on CUDA cores, each sum over the rows crosses the four warps through shared memory).
    With d = dL/dlogits as (64, 16) and a column of ones beside it, [d | 1]^T [h | d] holds
    dW1[units]^T in its first 10 rows and db1 in row ONES. Every part of each side is taken
    (for float32, 3 x 3 products), so the products are exact and only their sums round."""
    d = functools.reduce(jnp.add, [rows(v) * cols(load(eye.at[k], by_col))
                                   for k, v in enumerate(dlogits)])
    a = d + cols(load(eye.at[ONES], by_col))
    for p, bits in enumerate(split3(a)[:parts]):  # [d | 1]^T: rows 16p .. 16p + 15 of the lhs
      lhs.at[:, pl.ds(LANES * p, LANES)][...] = bits
    for q, (hq, dq) in enumerate(list(zip(split3(h), split3(d)))[:parts]):
      rhs.at[q, :, pl.ds(0, UNITS)][...] = hq
      rhs.at[q, :, pl.ds(UNITS, LANES)][...] = dq
    plgpu.commit_smem()  # Visible to the tensor cores.

    def products(acc):  # row 16p + k, column c: part p of [d | 1][:, k] times all of [h | d][:, c]
      for q in range(parts):
        plgpu.wgmma(acc, lhs.transpose((1, 0)), rhs.at[q])
      plgpu.wgmma_wait(0)
      return acc[...]
    got = pl.run_scoped(products, plgpu.ACC((BATCH, UNITS + LANES), f32))
    sync()  # Every warp's part of the product is done with lhs and rhs.
    _store(sums, got)  # (in their memory)
    sync()  # The rows of a part are in another warp: through shared memory.

    def row(r, start):  # Row r's 16 columns from start, every part's row added up
      return functools.reduce(jnp.add, [load(sums.at[LANES * p + r, pl.ds(start, 16)], by_col)
                                        for p in range(parts)])
    return [row(k, 0) for k in range(CLASSES)], row(ONES, UNITS)

  def held(first, last):  # W0's tiles first .. last - 1 in registers (float32), or () if not
    return tuple(w0_tile(j) for j in range(first, last)) if registers else ()

  def pass_sums(first, last):
    """W0's tiles first .. last - 1's gradients summed over a batch's passes so far, in
    registers (passes > 1, else ()). Their first values are never read (the first pass takes
    its gradient alone): W0's part, for the layout. (W1's and b1's sums are kept in their rows
    of ``small``, which hold nothing else between the launch's first and last step: registers
    there spilled.)"""
    if passes == 1:
      return ()
    return tuple(load(w0_part(j, 0), plgpu.Layout.WGMMA).astype(f32)
                 for j in range(first, last))

  def backward_tile(s, j, w, total=None):
    """dW0's tile j, and W0's tile j updated: w is its float32 value in registers (returned
    updated; only the parts the products take are stored, all three in the last step, for the
    output), or None where W0 is in shared memory only (its three parts loaded, added up,
    stored). With passes > 1, ``total`` is the tile's gradient summed over the step's earlier
    passes (in registers; any value in its first pass): this pass's is added, and W0 is updated
    in the last pass only. Returns (w, total)."""
    def tile_grad(acc):  # x[:, tile]^T dz, each part of dz: 64 inputs by the CTA's units
      plgpu.wgmma(acc, x.at[j].transpose((1, 0)), dzp.at[:, used])
      plgpu.wgmma_wait(0)
      return acc[...]
    grad = part_sum(pl.run_scoped(tile_grad, plgpu.ACC((64, UNITS * parts), f32)))

    sync()  # Every warp's part of the product is done with x's tile.
    if rowgroups == 1:
      @pl.when(s + 1 < steps)
      def _():  # This tile of x is done with: the next batch's comes in behind the backward.
        fetch_x(s + 1, j)
    else:  # The same, but in a step's last pass once the clusters' sums are in (``combine``)
      pl.when(jnp.logical_and(s + 1 < steps, jnp.logical_not(pass_of(s)[1])))(
          lambda: fetch_x(s + 1, j))
    rate = lr if lr is not None else cols(load(small.at[ROW_LR], by_col))
    if passes == 1:
      new = (w0_tile(j) if w is None else w) - rate * grad / 255.0  # as the twin rounds it
      for p, bits in enumerate(split3(new)[:3 if w is None else parts]):
        w0_part(j, p)[...] = bits
      if w is None:
        return None, None

      @pl.when(s + 1 == steps)
      def _():
        for p, bits in list(enumerate(split3(new)))[parts:]:
          w0_part(j, p)[...] = bits
      return new, None
    is_first, is_last = pass_of(s)
    total = choose(is_first, grad, total + grad)  # The passes' gradients in order, as the twin
    if rowgroups > 1:  # This cluster's sum, staged in x's tile, on its way out (``combine``)
      @pl.when(is_last)
      def _():
        _store(stage.at[j, 0], total)
        plgpu.commit_smem()  # Visible to the copy
        plgpu.copy_smem_to_gmem(stage.at[j, 0], row_sums.at[lax.rem(lax.div(s, rows_passes), 2),
                                                             0, m, c, j])
      return None, total
    if w is None:
      @pl.when(is_last)
      def _():
        for p, bits in enumerate(split3(w0_tile(j) - rate * total / 255.0)):
          w0_part(j, p)[...] = bits
      return None, total
    new = choose(is_last, w - rate * total / 255.0, w)

    @pl.when(is_last)
    def _():
      for p, bits in enumerate(split3(new)[:parts]):
        w0_part(j, p)[...] = bits

    @pl.when(s + 1 == steps)
    def _():
      for p, bits in list(enumerate(split3(new)))[parts:]:
        w0_part(j, p)[...] = bits
    return new, total

  def combine(s, first, last, totals):
    """rowgroups > 1, a step's last pass: the clusters' sums of W0's tiles first .. last - 1
    (``totals``: this cluster's, already on their way to global memory from half 0 of each tile
    of x's memory, ``backward_tile``; the first warpgroup's also W1's and b1's, in ``small``)
    added up in ``rounds`` exchanges: in round r each CTA meets the others at its warpgroup's
    grid barrier, reads the sums of cluster m ^ 2^r (its partner) into half 1 and adds them to
    its own (a + b: the same bits in both), and sends the result for the next round. Pairs,
    then pairs of pairs: every cluster ends with the same bits. Then W0's tiles are updated,
    and each tile's next x comes in as soon as its sums are read."""
    wg, step = (0 if first == 0 else 1), lax.div(s, rows_passes)
    slot = lax.rem(step, 2)  # Written again two steps later, after every reader's next barrier
    rate = lr if lr is not None else cols(load(small.at[ROW_LR], by_col))
    sum_rows = list(range(CLASSES)) + [ROW_B1]
    totals = list(totals)
    for r in range(rounds):
      partner = lax.bitwise_xor(m, 1 << r)
      if r > 0:  # The last round's sums, out (half 1 was read: the ``sync`` below)
        for i, j in enumerate(range(first, last)):
          _store(stage.at[j, 0], totals[i])
        plgpu.commit_smem()
        for j in range(first, last):
          plgpu.copy_smem_to_gmem(stage.at[j, 0], row_sums.at[slot, r, m, c, j])
      if wg == 0:  # (Round 0: the sums' rows stored in ``step`` are visible to this copy by
        # the ``commit_smem`` of backward_tile's last tile, this warpgroup's tile 0 at least.)
        plgpu.copy_smem_to_gmem(small, row_small.at[slot, r, m, c])
      plgpu.wait_smem_to_gmem(0)  # Done, not only read: then the arrival
      grid_barrier.barrier(counter.at[wg], (step * rounds + r + 1) * rowgroups * CTAS)
      grid_barrier.fence_for_copies()
      for j in range(first, last):  # Each on its tile's barrier: its next wait is this one's.
        plgpu.copy_gmem_to_smem(row_sums.at[slot, r, partner, c, j], stage.at[j, 1],
                                x_tiles.at[j])
      if wg == 0:
        plgpu.copy_gmem_to_smem(row_small.at[slot, r, partner, c], other_small[0], tma.at[4])
      final = r == rounds - 1
      for i, j in enumerate(range(first, last)):
        plgpu.barrier_wait(x_tiles.at[j])
        totals[i] = totals[i] + load(stage.at[j, 1], plgpu.Layout.WGMMA)
        if final:
          for p, bits in enumerate(split3(w0_tile(j) - rate * totals[i] / 255.0)):
            w0_part(j, p)[...] = bits
          sync()  # Every thread is done with this tile's sums: its x may come in.
          pl.when(s + 1 < steps)(functools.partial(fetch_x, s + 1, j))
      if wg == 0:  # W1's and b1's sums, added the same way (every thread loads, then stores)
        plgpu.barrier_wait(tma.at[4])
        added = [load(small.at[row], by_col) + load(other_small[0].at[row], by_col)
                 for row in sum_rows]
        sync()
        for row, total in zip(sum_rows, added):
          _store(small.at[row], total)
      if not final:
        sync()  # Half 1 read by every thread before the next round's copies write it

  def update_w0(s, first, last, ws, totals):
    """W0's tiles first .. last - 1; ws: see ``held``; totals: their gradients' sums over the
    step's passes so far (passes > 1; else ())."""
    if ws or totals:  # unrolled: registers are not indexed by a loop's counter
      out = [backward_tile(s, j, ws[i] if ws else None, totals[i] if totals else None)
             for i, j in enumerate(range(first, last))]
      ws = tuple(w for w, _ in out) if ws else ()
      totals = tuple(t for _, t in out) if totals else ()
      if rowgroups > 1:
        pl.when(pass_of(s)[1])(lambda: combine(s, first, last, totals))
    else:
      over_tiles(lambda j: backward_tile(s, j, None), first, last)
    plgpu.commit_smem()
    return ws, totals

  def forward(first, last):  # z's part from W0's tiles first .. last - 1 (not yet / 255)
    def product(acc):  # x times W0's parts side by side: x is read once
      def one(j):  # Each tile's product as soon as its x is in: the last copies overlap the
        plgpu.barrier_wait(x_tiles.at[j])  # earlier products (a faster step than waiting for all)
        plgpu.wgmma(acc, x.at[j], w0p.at[tile(j), used])
      over_tiles(one, first, last)
      plgpu.wgmma_wait(0)
      return acc[...]
    return part_sum(pl.run_scoped(product, plgpu.ACC((BATCH, UNITS * parts), f32)))

  def across_groups(s, parity, total):
    """Class c's sum over the cluster's units, ``total`` (64,), added up with the other
    groups' in group order: each group's CTA c writes its sum to global memory, the groups'
    class CTAs meet at a grid barrier (the step's), and each reads all groups' sums (into its
    inbox, whose columns are read and whose next ones come only after this step's logits). A
    group's slot by step parity: a slot is written again two steps later, after the next
    step's barrier, which every reader reaches only after reading it."""
    _store(columns.at[CLASSES], total)
    grid_barrier.share(counter.at[0], (s + 1) * CLASSES * groups, columns.at[CLASSES],
                       group_sums.at[parity, m, c], group_sums.at[parity, :, c],
                       inbox.at[pl.ds(0, groups)], tma.at[4])
    return functools.reduce(jnp.add, [load(inbox.at[g], by_row) for g in range(groups)])

  def exchange_global(s, parity, b1):
    """``exchange`` without a cluster (``flat``): the same sums in the same order, through
    global memory, each round closed by a grid barrier of all groups' CTAs (the k-th at k times
    their count: three a step). Round 1: every CTA sends its partial logits, and each group's
    CTA k < 10 adds up class k's 16 columns in CTA order; round 2: each group's CTA k adds the
    groups' sums in group order and b1[k] (every group the same bits); round 3: every CTA reads
    its group's logits. A slot by step parity is written again two steps later, after barriers
    that every reader passes only once done with it."""
    parts, sums, logits = group_sums

    def send(src, dst):  # Shared src to global dst: done, not only read, before an arrival
      sync()  # Every thread's stores before the copy
      plgpu.commit_smem()
      plgpu.copy_smem_to_gmem(src, dst)
      plgpu.wait_smem_to_gmem(0)

    def meet_all(k):  # The step's k-th grid barrier of every CTA, then copies may read
      grid_barrier.barrier(counter.at[0], (3 * s + k) * groups * CTAS)
      grid_barrier.fence_for_copies()

    def read(src, dst):  # Global src into shared dst, every thread done with dst's old values
      sync()
      plgpu.copy_gmem_to_smem(src, dst, tma.at[4])
      plgpu.barrier_wait(tma.at[4])

    def add_up(n):  # The inbox's rows 0 .. n - 1, in order
      return functools.reduce(jnp.add, [load(inbox.at[i], by_row) for i in range(n)])

    with jax.named_scope("exchange_1"):
      send(columns.at[pl.ds(0, CLASSES)], parts.at[parity, m, c])
      meet_all(1)

    @pl.when(c < CLASSES)
    def _():  # Class c's sum over the group's CTAs
      with jax.named_scope("sum_class"):
        read(parts.at[parity, m, :, c], inbox)
        _store(columns.at[CLASSES], add_up(CTAS))
        send(columns.at[CLASSES], sums.at[parity, c, m])
    meet_all(2)

    @pl.when(c < CLASSES)
    def _():  # Over the groups, and b1[c]
      read(sums.at[parity, c], inbox.at[pl.ds(0, groups)])
      _store(columns.at[CLASSES], add_up(groups) + entry(b1, c))
      send(columns.at[CLASSES], logits.at[parity, m, c])
    meet_all(3)
    with jax.named_scope("exchange_2"):
      read(logits.at[parity, m], logits_in.at[pl.ds(0, CLASSES)])
    with jax.named_scope("read_logits"):
      return [load(logits_in.at[k], by_row) for k in range(CLASSES)]

  def exchange(s, parity, b1):
    """The logits from the CTAs' partial logits (``columns`` 0 .. 9): CTA k < 10 adds up class
    k's 16 columns in CTA order (with groups > 1, then the groups' sums in group order) and
    adds b1[k], then every CTA gets the 10 sums."""
    def add_up(peers):  # This CTA's class, into its column CLASSES
      total = functools.reduce(jnp.add, peers)
      if groups > 1:
        total = across_groups(s, parity, total)
      _store(columns.at[CLASSES], total + entry(b1, c))

    if ptx:  # Each column copied to the CTA that adds it up, each sum to every CTA.
      with jax.named_scope("exchange_1"):
        plgpu.commit_smem()  # The columns visible to the copy engine
        cluster_push.scatter(columns.at[pl.ds(0, CLASSES)], inbox, bars, 0)

      @pl.when(c < CLASSES)
      def _():
        with jax.named_scope("sum_class"):
          by_parity(parity, lambda p: cluster_push.wait(bars, 0, p))
          add_up([load(inbox.at[peer], by_row) for peer in range(CTAS)])
          plgpu.commit_smem()
          cluster_push.broadcast(columns.at[CLASSES], logits_in, bars, 1, CTAS)
      with jax.named_scope("exchange_2"):
        by_parity(parity, lambda p: cluster_push.wait(bars, 1, p))
      with jax.named_scope("read_logits"):
        return [load(logits_in.at[k], by_row) for k in range(CLASSES)]

    # Pulled (Mosaic GPU's interpreter, which runs no PTX): each CTA reads its peers' memory
    # after a cluster barrier.
    by_parity(parity, meet)

    @pl.when(c < CLASSES)
    def _():  # All 16 reads first (in flight together), then added up in CTA order.
      add_up([load(plgpu.cluster_ref(columns.at[c], {"cta": peer}), by_row)
              for peer in range(CTAS)])
    by_parity(parity, lambda p: meet(2 + p))
    return [load(plgpu.cluster_ref(columns.at[CLASSES], {"cta": k}), by_row)
            for k in range(CLASSES)]

  def step(s, parity, carry):
    w1, b1, ws, w0_sums = carry  # (pass_sums: passes > 1)
    with jax.named_scope("forward"):
      z = forward(0, split)
      if warpgroups == 2:
        plgpu.barrier_wait(w0_done)  # The second warpgroup's tiles updated, their part of z in
        z = z + load(zb, plgpu.Layout.WGMMA)
      z = z / 255.0  # b0 included: it is W0's row 784, times x's 255
    with jax.named_scope("partials"):
      h = jnp.maximum(z, 0.0)
      for k in range(CLASSES):
        _store(columns.at[k], jnp.sum(h * cols(w1[k]), axis=1))
    if exchanges:
      logits = (exchange_global if flat else exchange)(s, parity, b1)
    else:  # (a probe's floor: each CTA's own partial logits, no exchange; wrong numbers)
      sync()
      logits = [load(columns.at[k], by_row) for k in range(CLASSES)]
    plgpu.barrier_wait(tma.at[3])  # The labels
    with jax.named_scope("softmax"):
      labels = [load(onehot.at[k], by_row).astype(f32) for k in range(CLASSES)]
      top = functools.reduce(jnp.maximum, logits)
      e = [jnp.exp(v - top) for v in logits]
      total = functools.reduce(jnp.add, e)
      picked = functools.reduce(jnp.add, [t * v for t, v in zip(labels, logits)])
      dlogits = [(v / total - t) * (1.0 / (BATCH * passes)) for v, t in zip(e, labels)]

      @pl.when((c == 0) if groups == 1 or rowgroups > 1 else jnp.logical_and(c == 0, m == 0))
      def _():
        plgpu.wait_smem_to_gmem(1, wait_read_only=True)  # This buffer's copy of 2 steps ago,
        sync()  # waited for by the thread that issued it.
        _store(met.at[parity, 0], jnp.log(total) + top - picked)
        _store(met.at[parity, 1], jnp.where(picked >= top, 1.0, 0.0))
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(met.at[parity], metrics_out.at[data, batch_pass(s)])

    with jax.named_scope("backward_small"):
      dh = functools.reduce(jnp.add, [rows(d) * cols(w) for d, w in zip(dlogits, w1)])
      dz = jnp.where(z > 0.0, dh, 0.0)
      for p, bits in enumerate(split3(dz)[:parts]):
        dzp.at[:, pl.ds(UNITS * p, UNITS)][...] = bits
      plgpu.commit_smem()  # Visible to the tensor cores.
      if warpgroups == 2:
        plgpu.barrier_arrive(dz_ready)  # The second warpgroup updates its tiles meanwhile.
      dw1, db1 = small_grads(h, dlogits)
      if warpgroups == 2:
        sync()  # Every thread has read the sums: zb may take their memory.
        plgpu.barrier_arrive(small_done)

    @pl.when(s + 1 < steps)
    def _():  # The labels are read.
      plgpu.copy_gmem_to_smem(onehot_in.at[data, batch_pass(s + 1)], onehot, tma.at[3])

    if rowgroups == 1:  # (With rowgroups > 1 after W1's sums: ``combine`` sends them.)
      with jax.named_scope("backward_w0"):
        ws, w0_sums = update_w0(s, 0, split, ws, w0_sums)
    rate = lr if lr is not None else load(small.at[ROW_LR], by_col)
    if passes == 1:
      w1 = tuple(w - rate * d for w, d in zip(w1, dw1))
      return w1, b1 - rate * db1, ws, ()
    # Several passes: the gradients added up in pass order, the update in the last.
    is_first, is_last = pass_of(s)

    # The sums so far in ``small``'s rows (only this warpgroup reads and writes them), this
    # pass's added. A row's 16 values are held by 32 threads each (``by_col``), which all store
    # them: every thread loads before any stores (``sync``), else a late warp could load a row
    # already updated and add this pass's gradient twice.
    sum_rows = list(range(CLASSES)) + [ROW_B1]
    so_far = [load(small.at[row], by_col) for row in sum_rows]
    sync()
    totals = [choose(is_first, g, t + g) for t, g in zip(so_far, list(dw1) + [db1])]
    for row, total in zip(sum_rows, totals):
      _store(small.at[row], total)
    dw1, db1 = tuple(totals[:CLASSES]), totals[CLASSES]
    if rowgroups > 1:
      with jax.named_scope("backward_w0"):
        ws, w0_sums = update_w0(s, 0, split, ws, w0_sums)
      # All clusters' sums, in ``small`` after ``combine`` (only the last pass's count)
      sync()
      dw1 = tuple(load(small.at[k], by_col) for k in range(CLASSES))
      db1 = load(small.at[ROW_B1], by_col)
    w1 = tuple(choose(is_last, w - rate * d, w) for w, d in zip(w1, dw1))
    return w1, choose(is_last, b1 - rate * db1, b1), ws, w0_sums

  # One step traced, its buffers' parity a value: Mosaic GPU's layout inference has half the
  # kernel to search than with two steps traced, a static parity each (jax 0.11.2: lowering
  # 21 s -> 4 s on the CPU; compile 51 -> 11 s on the H100).
  def first():  # The steps, and W0's first tiles
    carry = lax.fori_loop(0, steps, lambda s, carry: step(s, lax.rem(s, 2), carry), start())
    w1, b1, *_ = carry
    if warpgroups == 2:
      plgpu.barrier_wait(w0_done)  # The second warpgroup's tiles of the last step
    if not flat:  # (flat: no CTA reads another's shared memory)
      meet(4)  # No CTA leaves while a peer may still read its buffers.
    for k in range(CLASSES):
      _store(small.at[k], w1[k])
    _store(small.at[ROW_B1], b1)  # The same in every CTA.
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(w0p, w0p_out.at[m, c])
    plgpu.copy_smem_to_gmem(small, small_out.at[m, c])
    plgpu.wait_smem_to_gmem(0)

  def second():  # W0's tiles split .. 12: their update, and their part of the next forward
    def z_part():  # Its tiles' part of z, into zb, once the batch's tiles are in.
      _store(zb, forward(split, TILES))
      sync()  # For the first warpgroup (before the arrival)

    def tiles(s, carry):
      plgpu.barrier_wait(dz_ready)
      carry = update_w0(s, split, TILES, *carry)
      plgpu.barrier_wait(small_done)  # zb's memory is free.
      pl.when(s + 1 < steps)(z_part)
      plgpu.barrier_arrive(w0_done)
      return carry
    # W0's parts come by a copy the first warpgroup issued, before x's tiles but not
    # necessarily in before them.
    plgpu.barrier_wait(tma.at[0])
    z_part()
    plgpu.barrier_arrive(w0_done)
    lax.fori_loop(0, steps, tiles, (held(split, TILES), pass_sums(split, TILES)))

  if warpgroups == 2:
    wg = lax.axis_index("wg")
    pl.when(wg == 0)(first)
    pl.when(wg == 1)(second)
  else:
    first()


@functools.lru_cache(maxsize=None)
def _call(steps: int, lr: float | None, parts: int, interpret: bool = False,
          profile_dir: str | None = None, members: int = 1, groups: int = 1, passes: int = 1,
          rowgroups: int = 1, flat: bool = False, exchanges: bool = True):
  """The kernel for ``members`` networks, one cluster each (each input and output with a
  leading member axis); ``lr`` None: each network's own, from row ROW_LR of its small
  parameters. ``groups`` > 1: one network of ``groups`` x 256 units instead, a cluster a group
  (W0 and W1 with a leading group axis; the batches and the metrics with one of size 1).
  ``steps`` counts passes of 64 rows: an SGD step of 64 ``passes`` rows takes ``passes``.
  ``rowgroups`` > 1: one network, its step's passes split between ``rowgroups`` clusters of the
  same units (``steps`` is then each cluster's count), which add up their sums through global
  memory at a grid barrier in each step's last pass (W0 in shared memory only: ``registers``
  off). ``flat``: the groups' CTAs launched without clusters, the exchanges through global
  memory (``exchange_global``): more groups than the GPU holds clusters, one pass a step.
  ``exchanges`` off: no exchange, each CTA's own partial logits taken as the logits (wrong
  numbers: what the rest of the step costs, ``probes.cluster_floor``)."""
  if flat and (groups < 2 or passes > 1 or members > 1 or interpret or profile_dir):
    raise ValueError("a network of several groups without clusters: one pass a step, alone, "
                     "compiled (Mosaic GPU's interpreter cannot run the grid barrier)")
  if rowgroups > 1 and (rowgroups not in (2, 4) or groups > 1 or members > 1 or interpret
                        or profile_dir or passes % rowgroups):
    raise ValueError("a step's passes split between clusters: two or four clusters of one "
                     "network of 256 units, compiled (Mosaic GPU's interpreter cannot run the "
                     "grid barrier), the passes a multiple of the clusters")
  if groups > 1 and (members > 1 or interpret or profile_dir):
    raise ValueError("a network of several groups trains alone, compiled (Mosaic GPU's "
                     "interpreter cannot run the grid barrier)")
  if flat:
    grid_barrier.check_resident_ctas(groups * CTAS)
  else:
    grid_barrier.check_resident(max(groups, rowgroups))
  from jax.experimental.pallas import mosaic_gpu as plgpu
  # Barriers between a warpgroup's threads where they hand data over (sync, commit_smem), not
  # around every store to shared memory (about 190 a step, counted in the code): a faster step.
  params = {"unsafe_no_auto_barriers": True, "lowering_semantics": semantics()}
  layout_search.install()  # jax 0.11's inference (Warpgroup), the same answer sooner
  if profile_dir:  # Each scope takes 4 entries a step, the header 3.
    params.update(profile_space=4 * len(PHASES) * steps + 8, profile_dir=profile_dir)
  f32, bf16 = jnp.float32, jnp.bfloat16
  # Mosaic GPU's interpreter (jax 0.11.2) did not finish the kernel with two warpgroups (cause
  # not found), and the profiler's buffers did not fit beside two (232,800 bytes of shared
  # memory asked for, 232,448 there, in an earlier form of the kernel; a scratch copy with four
  # steps' entries counted per range did fit beside two, docs/design/cluster_kernels.md): in
  # both, the first warpgroup does all of W0's tiles.
  warpgroups = 1 if interpret or profile_dir else 2
  # W0's tiles 0 .. split - 1 are the first warpgroup's, the rest the second's (the first also
  # takes the small products: 5 and 8 ran fastest in float32 of the splits tried, 4 to 7, with
  # the exchanges pulled and pushed; docs/design/cluster_kernels.md).
  split = (SPLIT if passes == 1 else PASS_SPLIT[parts]) if warpgroups == 2 else TILES
  # W0's float32 values held in registers at tf32 and bfloat16 (a faster step, the same bits);
  # at float32 ptxas spills and the step is slower.
  registers = parts < 3 and (passes == 1 or PASS_REGISTERS[parts]) and rowgroups == 1
  # wgmma takes one swizzle for both operands: W0's and dz's rows of 16 units set it.
  tiles = (plgpu.TilingTransform((8, 16)), plgpu.SwizzleTransform(32))
  clusters = groups if groups > 1 else rowgroups if rowgroups > 1 else members
  rounds = _rounds(rowgroups)
  return plgpu.kernel(
      functools.partial(_kernel, steps=steps, lr=lr, parts=parts, unroll=interpret,
                        warpgroups=warpgroups, split=split, ptx=not interpret,
                        registers=registers, groups=groups, passes=passes,
                        rowgroups=rowgroups, flat=flat, exchanges=exchanges),
      out_type=(jax.ShapeDtypeStruct((clusters, CTAS, PADDED, 3 * UNITS), bf16),
                jax.ShapeDtypeStruct((clusters, CTAS, SMALL_ROWS, UNITS), f32),
                jax.ShapeDtypeStruct((members, steps * rowgroups, 2, BATCH), f32))
               # The groups' class sums, by step parity (read back by every group); flat:
               # each CTA's partial logits, the groups' class sums, each group's logits
               + ((jax.ShapeDtypeStruct((2, groups, CTAS, CLASSES, BATCH), f32),
                   jax.ShapeDtypeStruct((2, CLASSES, groups, BATCH), f32),
                   jax.ShapeDtypeStruct((2, groups, CLASSES, BATCH), f32)) if flat else
                  (jax.ShapeDtypeStruct((2, groups, CLASSES, BATCH), f32),) if groups > 1
                  else ())
               # The clusters' pass sums of W0's tiles and of W1 and b1, by step parity and
               # exchange round
               + ((jax.ShapeDtypeStruct((2, rounds, rowgroups, CTAS, TILES, 64, UNITS), f32),
                   jax.ShapeDtypeStruct((2, rounds, rowgroups, CTAS, SMALL_ROWS, UNITS), f32))
                  if rowgroups > 1 else ()),
      # One cluster a network: the clusters share nothing, and those that do not fit on the
      # GPU at once (a 16-CTA cluster takes 16 SMs of one GPC) wait for a free one.
      **(dict(grid=(groups, CTAS), grid_names=("member", "cta")) if flat else
         dict(grid=(clusters,), grid_names=("member",), cluster=(CTAS,), cluster_names=("cta",))),
      num_threads=warpgroups, thread_name="wg",
      compiler_params=plgpu.CompilerParams(**params),
      **({"interpret": plgpu.InterpretGPUParams()} if interpret else {}),
      scratch_types=[
          # x, by tiles of 64 inputs (rowgroups > 1: also each tile's pass sums, this
          # cluster's and its partner's, in the last pass: ``combine``)
          plgpu.RefUnion(plgpu.SMEM((TILES, BATCH, 64), bf16, transforms=tiles),
                         plgpu.SMEM((TILES, 2, 64, UNITS), f32)) if rowgroups > 1 else
          plgpu.SMEM((TILES, BATCH, 64), bf16, transforms=tiles),
          plgpu.SMEM((PADDED, 3 * UNITS), bf16, transforms=tiles),  # W0's parts side by side
          plgpu.RefUnion(  # one memory, used in turn by
              (plgpu.SMEM((BATCH, 64), bf16, transforms=tiles),  # [d | 1]'s parts side by side
               plgpu.SMEM((3, BATCH, UNITS + LANES), bf16, transforms=tiles)),  # [h | d]'s parts
              plgpu.SMEM((BATCH, UNITS + LANES), f32),  # their products' sums
              plgpu.SMEM((BATCH, UNITS), f32)),  # the second warpgroup's part of z
          plgpu.SMEM((BATCH, 3 * UNITS), bf16, transforms=tiles),  # dz's parts side by side
          plgpu.SMEM((CLASSES, BATCH), bf16),  # the one-hot labels, class by class (0 and 1)
          plgpu.SMEM((LANES, LANES), f32),  # the identity (its rows pick a class)
          plgpu.SMEM((SMALL_ROWS, UNITS), f32),  # W1[units]^T and b1, in and out
          plgpu.SMEM((2, 2, BATCH), f32),  # per-row losses and correct flags, by parity
          # (5: the groups' sums, or the partner cluster's small rows)
          plgpu.Barrier(num_barriers=4 if groups == 1 and rowgroups == 1 else 5),
          plgpu.Barrier(num_barriers=TILES),  # x's tiles, one barrier each
          # dz's parts written; the second's tiles new and its part of z in; the sums read
          plgpu.Barrier(), plgpu.Barrier(), plgpu.Barrier(),
          # (flat: no cluster; a barrier of its own in the place, unused)
          plgpu.Barrier(num_barriers=5) if flat else
          plgpu.ClusterBarrier(collective_axes=("cta",), num_barriers=5),
          # The partial logits by class, then (CTA k < 10) class k's logits
          plgpu.SMEM((CLASSES + 1, BATCH), f32),
          plgpu.SMEM((CTAS, BATCH), f32),  # class k's partial logits by CTA (pushed to CTA k)
          # The logits by class (pushed), then the pushes' two mbarriers
          plgpu.SMEM((CLASSES + 1, BATCH), f32),
      ] + ([plgpu.SMEM((SMALL_ROWS, UNITS), f32)] if rowgroups > 1 else []))  # partner's small


def _pack(params, lr=0.0):
  """params [{"w": (784, 256), "b": (256,)}, {"w": (256, 10), "b": (10,)}] as the kernel's
  inputs: W0's columns by CTA with b0 as input 784's row, padded to 832 inputs, split in three
  parts set side by side (CTA, input, part * 16 + unit); each CTA's rows of W1 (transposed,
  classes padded to 16) with b1 in its last row and ``lr`` in row ROW_LR."""
  w0 = _with_bias(params[0]["w"], params[0]["b"])
  w0 = w0.reshape(PADDED, CTAS, UNITS).transpose(1, 0, 2)
  w1 = jnp.pad(params[1]["w"], ((0, 0), (0, LANES - CLASSES)))
  b1 = jnp.pad(params[1]["b"], (0, LANES - CLASSES))
  small = w1.reshape(CTAS, UNITS, LANES).transpose(0, 2, 1)
  small = small.at[:, ROW_B1].set(jnp.broadcast_to(b1, (CTAS, LANES)))
  small = small.at[:, ROW_LR].set(jnp.asarray(lr, small.dtype))
  return jnp.concatenate(dense_mgpu.split3(w0), axis=2), small


def _unpack(w0p, small):
  f32 = jnp.float32
  hi, mid, lo = (w0p[:, :, UNITS * p:UNITS * (p + 1)].astype(f32) for p in range(3))
  w0 = (hi + mid) + lo  # exact
  w0 = w0.transpose(1, 0, 2).reshape(PADDED, HIDDEN)
  w1 = small[:, :LANES].transpose(0, 2, 1).reshape(HIDDEN, LANES)[:, :CLASSES]
  return [{"w": w0[:INPUTS], "b": w0[INPUTS]},
          {"w": w1, "b": small[0, ROW_B1, :CLASSES]}]


def _with_bias(w0, b0):
  """W0 (784, 256) with b0 as row 784, zeros to 832 rows: x's input 784 is 255, so x W0 / 255
  adds b0, and the update of row 784 is b0's."""
  return jnp.concatenate([w0, b0[None], jnp.zeros((PADDED - INPUTS - 1, w0.shape[1]), w0.dtype)])


def pixel_batches(x, order, steps: int):
  """The epoch's pixels as the kernels take them (this one and ``logreg_mgpu``): (steps, 64,
  832) in bfloat16, the uint8 values exactly; input 784 is 255 (b0's), the rest 0."""
  idx = order[:steps * BATCH]
  pad = jnp.zeros((steps * BATCH, PADDED - INPUTS), jnp.bfloat16).at[:, 0].set(255)
  return jnp.concatenate([x[idx].reshape(steps * BATCH, INPUTS).astype(jnp.bfloat16), pad],
                         axis=1).reshape(steps, BATCH, PADDED)


def batches(x, labels, order, steps: int):
  """The epoch's batches as the kernel takes them: pixels (``pixel_batches``) and one-hot
  labels (steps, 10, 64) in bfloat16, class by class."""
  idx = order[:steps * BATCH]
  onehot = jax.nn.one_hot(labels[idx], CLASSES, dtype=jnp.bfloat16)  # 0 and 1, exactly
  onehot = onehot.reshape(steps, BATCH, CLASSES)
  return pixel_batches(x, order, steps), onehot.transpose(0, 2, 1)


def train_steps(params, xs, onehot, lr: float, precision: str = "float32", interpret: bool = False,
          profile_dir: str | None = None, passes: int = 1, rowgroups: int = 1,
          exchanges: bool = True):
  """SGD steps in one launch on the batches of ``batches``: a step of 64 ``passes`` rows takes
  ``passes`` of them in turn (the kernel's passes over one batch; ``rowgroups`` 2 or 4: split
  between that many clusters, ``_train_rowgroups``). Returns (params, losses
  (steps,), correct counts (steps,)), each step's before its update. Hopper only, or
  ``interpret`` (Mosaic GPU's interpreter on the CPU; see the module's docstring).
  ``profile_dir`` adds Mosaic GPU's profiler (a few steps only: its buffer grows with them; the
  kernel then runs one warpgroup, as in the interpreter). ``exchanges`` off (one network of 256
  units, one pass a step): no exchange between the CTAs, wrong numbers (a probe's floor)."""
  hidden = params[0]["w"].shape[1]
  if not exchanges and (hidden != HIDDEN or passes > 1 or rowgroups > 1 or interpret):
    raise ValueError("exchanges off: one network of 256 units, one pass a step, compiled")
  groups = _groups(hidden)
  if not hidden:
    raise ValueError("it trains a hidden layer of at least one unit")
  if xs.shape[0] % passes:
    raise ValueError(f"{xs.shape[0]} batches of 64 rows are not steps of {passes}")
  if hidden % HIDDEN:
    padded, losses, correct = train_steps(pad_hidden(params, groups * HIDDEN), xs, onehot, lr,
                                          precision, interpret, profile_dir, passes)
    return unpad_hidden(padded, hidden), losses, correct
  if groups > 1:
    return _train_groups(params, xs, onehot, lr, precision, groups, interpret, profile_dir,
                         passes)
  if rowgroups > 1:
    return _train_rowgroups(params, xs, onehot, lr, precision, passes, rowgroups, interpret)
  call = _call(xs.shape[0], float(lr), PARTS[precision], interpret, profile_dir, passes=passes,
               exchanges=exchanges)
  one = lambda a: a[None]  # A population of one; its learning rate is the kernel's constant.
  params, losses, correct = _launch(call, jax.tree.map(one, params), jnp.zeros(1, jnp.float32),
                                    one(xs), one(onehot), passes)
  return jax.tree.map(lambda a: a[0], params), losses[0], correct[0]


def pad_hidden(params, units: int):
  """The network with ``units`` hidden units: the added ones with zero weights and bias in and
  out. They train as no units at all, exactly: their pre-activation is 0, so their ReLU output
  and its gradient are 0, and so are their weights' updates (adding their zero partial logits
  leaves every sum's bits as they were)."""
  pad = units - params[0]["w"].shape[1]
  return [{"w": jnp.pad(params[0]["w"], ((0, 0), (0, pad))),
           "b": jnp.pad(params[0]["b"], (0, pad))},
          {"w": jnp.pad(params[1]["w"], ((0, pad), (0, 0))), "b": params[1]["b"]}]


def unpad_hidden(params, hidden: int):
  """``pad_hidden``'s inverse: the first ``hidden`` units."""
  return [{"w": params[0]["w"][:, :hidden], "b": params[0]["b"][:hidden]},
          {"w": params[1]["w"][:hidden], "b": params[1]["b"]}]


def split_groups(params, groups: int):
  """One network of ``groups`` x 256 hidden units as ``groups`` stacked networks of 256 (its
  units in order), each with the whole b1."""
  (w0, b0), (w1, b1) = (params[0]["w"], params[0]["b"]), (params[1]["w"], params[1]["b"])
  return [{"w": w0.reshape(INPUTS, groups, HIDDEN).transpose(1, 0, 2),
           "b": b0.reshape(groups, HIDDEN)},
          {"w": w1.reshape(groups, HIDDEN, CLASSES),
           "b": jnp.broadcast_to(b1, (groups,) + b1.shape)}]


def join_groups(stacked):
  """``split_groups``' inverse (b1 from the first group: every group holds the same)."""
  groups = stacked[0]["w"].shape[0]
  return [{"w": stacked[0]["w"].transpose(1, 0, 2).reshape(INPUTS, groups * HIDDEN),
           "b": stacked[0]["b"].reshape(groups * HIDDEN)},
          {"w": stacked[1]["w"].reshape(groups * HIDDEN, CLASSES), "b": stacked[1]["b"][0]}]


def _train_groups(params, xs, onehot, lr: float, precision: str, groups: int,
                  interpret: bool = False, profile_dir: str | None = None, passes: int = 1):
  """``train_steps`` of a network of ``groups`` x 256 units: a cluster a group, one launch
  (more groups than the GPU holds clusters: without clusters, ``_flat``)."""
  call = _call(xs.shape[0], float(lr), PARTS[precision], interpret, profile_dir, groups=groups,
               passes=passes, flat=_flat(groups))
  stacked, losses, correct = _launch(call, split_groups(params, groups),
                                     jnp.zeros(groups, jnp.float32), xs[None], onehot[None],
                                     passes)
  return join_groups(stacked), losses[0], correct[0]


def _train_rowgroups(params, xs, onehot, lr: float, precision: str, passes: int, rowgroups: int,
                     interpret: bool = False):
  """``train_steps`` with each step's passes split between ``rowgroups`` clusters of the same
  units, one launch: each cluster holds the whole network (the same bits in each)."""
  call = _call(xs.shape[0] // rowgroups, float(lr), PARTS[precision], interpret, passes=passes,
               rowgroups=rowgroups)
  copies = jax.tree.map(lambda a: jnp.broadcast_to(a, (rowgroups,) + a.shape), params)
  stacked, losses, correct = _launch(call, copies, jnp.zeros(rowgroups, jnp.float32), xs[None],
                                     onehot[None], passes)
  return jax.tree.map(lambda a: a[0], stacked), losses[0], correct[0]


def _launch(call, params, lrs, xs, onehot, passes: int = 1):
  """``call`` (a ``_call`` kernel) on stacked params, learning rates, batches and labels: the
  members' params, losses (members, steps) and correct counts (members, steps), a step's over
  its ``passes`` x 64 rows."""
  w0p, small = jax.vmap(_pack)(params, lrs)
  # (A network of several groups: one batch and metrics row, and its groups' sums, unread.)
  w0p, small, metrics, *_ = call(w0p, small, jnp.eye(LANES, dtype=jnp.float32), xs, onehot)
  if passes > 1:  # (members, steps x passes, 2, 64) -> (members, steps, 2, a step's rows)
    members, runs = metrics.shape[:2]
    metrics = metrics.reshape(members, runs // passes, passes, 2, BATCH).transpose(0, 1, 3, 2, 4)
    metrics = metrics.reshape(members, runs // passes, 2, passes * BATCH)
  return (jax.vmap(_unpack)(w0p, small), *common.step_metrics(metrics))


def train_population(params, xs, onehot, lrs, precision: str = "float32", twin: bool = False):
  """A population's ``steps`` SGD steps in one launch, a cluster a network: params stacked on a
  leading member axis, each member's own batches (``batches`` of its order, stacked) and
  learning rate ``lrs`` (members,). Returns (params, losses (members, steps), correct counts
  (members, steps)). Each member's numbers are those of ``train_steps`` alone, bit for bit.
  ``twin``: ``reference`` for each member in the kernel's place (the CPU tests of what is
  around it)."""
  if twin:
    return jax.vmap(reference)(params, xs.astype(params[0]["w"].dtype),
                               onehot.astype(params[0]["w"].dtype), lrs)
  members, steps = xs.shape[:2]
  return _launch(_call(steps, None, PARTS[precision], members=members), params, lrs, xs, onehot)



def train_epoch(params, x, labels, order, lr: float, *, steps: int, precision: str = "float32",
                batch: int = BATCH, rowgroups: int | None = None):
  """One epoch: ``steps`` batches of ``batch`` rows of ``x`` (N, 784) uint8 pixels and integer
  ``labels`` (N,) gathered in ``order``, then ``train_steps``; ``rowgroups`` None: as
  ``rowgroups_for`` says. Returns (params, losses, correct counts)."""
  if batch % BATCH or batch < BATCH:
    raise ValueError(f"it takes batches of 64 P rows (P passes; checked: {BATCHES}), not {batch}")
  if rowgroups is None:
    rowgroups = rowgroups_for(params[0]["w"].shape[1], batch)
  passes = batch // BATCH
  xs, onehot = batches(x, labels, order, steps * passes)
  return train_steps(params, xs, onehot, lr, precision, passes=passes, rowgroups=rowgroups)

def reference(params, xs, onehot, lr: float, passes: int = 1, rowgroups: int = 1):
  """The plain-jnp twin of ``train_steps`` (of a hidden layer of 256 G units: pad others first,
  ``pad_hidden``): the same steps at params' dtype's full precision, the
  pixels' 1/255 applied after the first product (b0 in it, as W0's row 784) and the logits
  summed over the 16-unit groups in order, then (a wider network) over its clusters' sums in
  order, as the kernel does; a step of ``passes`` batches of 64 adds their gradients in order
  (with ``rowgroups`` 2 or 4, each group's in order, then the groups' sums in pairs, then pairs
  of pairs)."""
  hi = lax.Precision.HIGHEST
  dtype = params[0]["w"].dtype
  w0 = _with_bias(params[0]["w"], params[0]["b"])
  w1, b1 = params[1]["w"], params[1]["b"]

  def one_pass(w0, w1, b1, x, t):  # A pass's per-row losses, correct flags and gradients
    x, t = x.astype(dtype), t.T[:, :CLASSES].astype(dtype)
    z = jnp.dot(x, w0, precision=hi) / 255.0
    h = jnp.maximum(z, 0.0)
    groups = w1.shape[0] // HIDDEN
    parts = (h[:, :, None] * w1[None]).reshape(BATCH, groups, CTAS, UNITS, CLASSES).sum(axis=3)
    sums = []
    for g in range(groups):
      sums.append(parts[:, g, 0])
      for c in range(1, CTAS):
        sums[g] = sums[g] + parts[:, g, c]
    logits = functools.reduce(jnp.add, sums) + b1
    top = jnp.max(logits, axis=1, keepdims=True)
    e = jnp.exp(logits - top)
    total = jnp.sum(e, axis=1, keepdims=True)
    picked = jnp.sum(t * logits, axis=1, keepdims=True)
    dlogits = (e / total - t) / (BATCH * passes)
    dz = jnp.where(z > 0, jnp.dot(dlogits, w1.T, precision=hi), 0.0)
    grads = (jnp.dot(x.T, dz, precision=hi), jnp.dot(h.T, dlogits, precision=hi),
             jnp.sum(dlogits, axis=0))
    return (jnp.log(total) + top - picked)[:, 0], (picked >= top)[:, 0], grads

  def step(carry, batch):
    w0, w1, b1 = carry
    rows, flags, sums = [], [], []
    for p in range(passes):
      loss, right, g = one_pass(w0, w1, b1, batch[0][p], batch[1][p])
      rows.append(loss)
      flags.append(right)
      if p % (passes // rowgroups) == 0:
        sums.append(g)
      else:
        sums[-1] = jax.tree.map(jnp.add, sums[-1], g)
    while len(sums) > 1:  # pairs, then pairs of pairs, as ``combine``
      sums = [jax.tree.map(jnp.add, a, b) for a, b in zip(sums[::2], sums[1::2])]
    gw0, gw1, gb1 = sums[0]
    new = (w0 - lr * gw0 / 255.0, w1 - lr * gw1, b1 - lr * gb1)
    return new, (jnp.mean(jnp.concatenate(rows)), jnp.sum(jnp.concatenate(flags)))

  steps = xs.shape[0] // passes
  batches = (xs.reshape(steps, passes, *xs.shape[1:]),
             onehot.reshape(steps, passes, *onehot.shape[1:]))
  (w0, w1, b1), (losses, correct) = lax.scan(step, (w0, w1, b1), batches)
  params = [{"w": w0[:INPUTS], "b": w0[INPUTS]}, {"w": w1, "b": b1}]
  return params, losses, correct.astype(jnp.int32)
