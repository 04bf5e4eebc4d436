"""Softmax regression's epoch in one CTA (Pallas Mosaic GPU, Hopper).

The network is 784 -> 10 with a bias, softmax cross-entropy and plain SGD, batch 64: the
project's softmax-regression workload. One launch runs every step of an epoch in one CTA of two
warpgroups, W in its shared memory for the whole launch. It is one CTA of the MLP's cluster
kernel (``cluster_mlp_mgpu``) with the classes where that CTA has its 16 hidden units, and the
softmax where that kernel has its ReLU, second layer and exchanges: so it needs no cluster, and
its compile is Mosaic GPU's (seconds), not XLA's handling of a Triton kernel (14-18 s for the
grid epoch kernel of this network on the H100, docs/design/time_to_result.md).

W (784, 10) and b sit in one (832, 16) matrix: b as row 784 (the images' input 784 is 255, so
x W / 255 adds b, and that row's update is b's), zeros to 832 rows (13 tiles of 64 inputs) and
16 classes (a wgmma N). A step:

  forward    z = x W / 255, a (64, 16) wgmma product over W's 13 tiles: 0 .. 5 by the first
             warpgroup, 6 .. 12 by the second (its part of z handed over in shared memory)
  softmax    over the 10 classes (the 6 padded ones masked off), the loss, whether the top
             class is the label's, and dz = (softmax - onehot) / 64
  backward   dW = x^T dz / 255 as thirteen (64, 16) wgmma products, each tile of W updated as
             soon as its product is done: tiles 0 .. 5 by the first warpgroup, 6 .. 12 by the
             second, which then takes its part of the next step's forward

Products keep float32's accuracy on the tensor cores as in ``cluster_mlp_mgpu``: the pixels are
integers (exact in bfloat16; the 1/255 is applied to the float32 sums) and W and dz are each
three bfloat16 parts side by side (``split3``), so every product is exact and only their float32
sums round; at tf32 and bfloat16 the products take two parts and one. The batch's tiles come by
TMA, each on its own barrier, the next step's tile j as soon as the backward is done with it.
The step's per-row losses and correct flags are written out and added after the launch in a
fixed order: the same bits in every run.

A population trains a CTA a network (``train_population``): the launch's grid holds one CTA a
member, each reading its member's W, learning rate (row 1 of its mask rows; the single network
takes it as a constant) and batches by ``lax.axis_index("member")``: of U sets of batches, member
m reads set m mod U (U = 1: all on the same batches; U = members: each its own; between, members
that share a seed share its batches, which are gathered once). The CTAs share nothing else, one
a SM at once (an H100 holds 132).

``reference`` is its plain-jnp twin. ``interpret`` runs it in Mosaic GPU's interpreter on the CPU
(jax 0.11 and newer), both warpgroups, with its race detector if asked. Its check on a GPU is
``experiments.check_kernels --only=logreg``. On the H100 (jax 0.11.2) an epoch of 937 steps took
4.40 ms against the grid epoch kernel's 4.86 (``mlp_epoch``, one process), compiled in about 2 s
against its 15-26, so ``jaxshallow.paths`` takes it for this network on Hopper, and a population
of it a CTA a member (docs/design/cluster_kernels.md, populations.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.fused import cluster_mlp_mgpu
from pallas_kernels.mgpu import layout_search
from pallas_kernels.ops import dense_mgpu
from pallas_kernels.ops.dense_mgpu import load as _load, store as _store

BATCH = 64  # wgmma's M: one warpgroup's rows.
INPUTS = 784
PADDED = 832  # 13 tiles of 64 inputs; input 784 is b's (x = 255).
TILES = PADDED // 64
# W's tiles 0 .. 5 are the first warpgroup's (its part of the forward), 6 .. 12 the second's:
# of 4 to 7, 6 and 7 ran fastest (docs/design/cluster_kernels.md).
SPLIT = 6
CLASSES = 10
LANES = 16  # Classes padded to a wgmma N.
PARTS = {"float32": 3, "tf32": 2, "bfloat16": 1}  # bfloat16 parts of W and dz in the products
WARPGROUPS = 2  # 1: the first warpgroup does every tile (for a probe)
# Measured on the H100 (jax 0.11.2, 2026-11-27; docs/design/cluster_kernels.md), each the same
# bits: Pallas' barrier around every store to shared memory dropped (the kernel has its own
# where threads hand data over, as ``cluster_mlp_mgpu``): 5.99 -> 5.22 ms an epoch; ``sync`` a
# bare barrier of the warpgroup (PTX) where no thread's store is read by the tensor cores or a
# copy, without ``commit_smem``'s proxy fence: 4.91. Knobs for probes (read when a kernel is
# built: ``_call.cache_clear()`` after a change); SEMANTICS None: ``cluster_mlp_mgpu.semantics``.
NO_AUTO_BARRIERS = True
BARE_SYNC = True
SEMANTICS = None


def problem(widths, batch: int, *, bias: bool, optimizer: str, dtype) -> str | None:
  """Why this kernel cannot train the network (one line), or None if it can."""
  if tuple(widths) != (INPUTS, CLASSES):
    return f"it trains {INPUTS}-{CLASSES} networks, not {'-'.join(map(str, widths))}"
  if batch != BATCH:
    return f"it takes batch {BATCH}, not {batch}"
  if not bias:
    return "it has a bias"
  return common.sgd_float32_problem(optimizer, dtype)


def _kernel(wp_in, mask_in, x_in, onehot_in,  # inputs (global memory)
            wp_out, metrics_out,  # outputs
            x, wp, dzp, zb, onehot, mask, met, tma, x_tiles, dz_ready, w_done,  # scratch
            *, steps: int, lr: float | None, parts: int, warpgroups: int, ptx: bool,
            batch_sets: int):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  m = lax.axis_index("member")  # The network this CTA trains (one, or a population's)
  data = lax.rem(m, batch_sets) if batch_sets > 1 else 0  # Its batches' set: m mod U
  f32 = jnp.float32
  wgmma_layout = plgpu.Layout.WGMMA
  by_col = wgmma_layout.reduce(0)  # (16,): one value a class
  used = pl.ds(0, LANES * parts)  # The parts' columns the products take.
  split = SPLIT if warpgroups == 2 else TILES

  def split3(a):  # Three bfloat16 parts that add up to a exactly
    return dense_mgpu.split3_in_kernel(a, ptx)

  def rows(v):  # (64,) -> (64, 16): v down the rows
    return lax.broadcast_in_dim(v, (BATCH, LANES), [0])

  def cols(v):  # (16,) -> (64, 16): v along the columns
    return lax.broadcast_in_dim(v, (BATCH, LANES), [1])

  def tile(j):  # Inputs 64j .. 64j + 63.
    return pl.ds(64 * j, 64)

  def over_tiles(body, first, last):
    # The interpreter (jax 0.11.2) hangs on a loop inside the step loop (cluster_mlp_mgpu), so
    # it runs the tiles unrolled; on the GPU a loop.
    if not ptx:
      for j in range(first, last):
        body(j)
    else:
      lax.fori_loop(first, last, lambda j, carry: (body(j), carry)[1], 0)

  def w_part(j, p):  # Part p of W's tile j, in shared memory.
    return wp.at[tile(j), pl.ds(LANES * p, LANES)]

  def part_sum(a):  # (64, 16 parts) -> (64, 16): the products of the parts added up
    return functools.reduce(jnp.add, [a[:, LANES * p:LANES * (p + 1)] for p in range(parts)])

  def fetch_x(s, j):  # Tile j of step s's pixels (integers, in bfloat16), on its own barrier.
    plgpu.copy_gmem_to_smem(x_in.at[data, s, :, tile(j)], x.at[j], x_tiles.at[j])

  def sync():  # A barrier of the warpgroup: its threads hand data over in shared memory.
    dense_mgpu.warpgroup_sync(ptx and BARE_SYNC)

  def forward(first, last):  # z's part from W's tiles first .. last - 1 (not yet / 255)
    def product(acc):
      def one(j):  # Each tile's product as soon as its x is in.
        plgpu.barrier_wait(x_tiles.at[j])
        plgpu.wgmma(acc, x.at[j], wp.at[tile(j), used])
      over_tiles(one, first, last)
      plgpu.wgmma_wait(0)
      return acc[...]
    return part_sum(pl.run_scoped(product, plgpu.ACC((BATCH, LANES * parts), f32)))

  def backward_tile(s, j):  # dW's tile j (x[:, tile]^T dz), and W's tile j updated
    def tile_grad(acc):
      plgpu.wgmma(acc, x.at[j].transpose((1, 0)), dzp.at[:, used])
      plgpu.wgmma_wait(0)
      return acc[...]
    grad = part_sum(pl.run_scoped(tile_grad, plgpu.ACC((64, LANES * parts), f32)))
    sync()  # Every warp's part of the product is done with x's tile.

    @pl.when(s + 1 < steps)
    def _():  # The next batch's tile comes in behind the backward.
      fetch_x(s + 1, j)
    w = functools.reduce(jnp.add, [_load(w_part(j, p), wgmma_layout).astype(f32)
                                   for p in range(3)])
    rate = lr if lr is not None else cols(_load(mask.at[1], by_col))  # (a population's: its own)
    new = w - rate * grad / 255.0  # as the twin rounds it
    for p, bits in enumerate(split3(new)):
      w_part(j, p)[...] = bits

  def update(s, first, last):
    over_tiles(lambda j: backward_tile(s, j), first, last)
    plgpu.commit_smem()  # The new parts visible to the tensor cores.

  def step(s, carry):
    parity = lax.rem(s, 2)
    z = forward(0, split)
    if warpgroups == 2:
      plgpu.barrier_wait(w_done)  # The second warpgroup's tiles updated, their part of z in
      z = z + _load(zb, wgmma_layout)
    z = z / 255.0  # b included: it is W's row 784, times x's 255
    plgpu.barrier_wait(tma.at[1])  # The labels
    t = _load(onehot, wgmma_layout)
    masked = z + cols(_load(mask.at[0], by_col))  # the padded classes at -inf
    top = jnp.max(masked, axis=1)
    e = jnp.exp(masked - rows(top))
    total = jnp.sum(e, axis=1)
    picked = jnp.sum(t * z, axis=1)
    dz = (e / rows(total) - t) * (1.0 / BATCH)
    for p, bits in enumerate(split3(dz)[:parts]):
      dzp.at[:, pl.ds(LANES * p, LANES)][...] = bits
    plgpu.commit_smem()  # dz visible to the tensor cores; the labels read by every thread
    if warpgroups == 2:
      plgpu.barrier_arrive(dz_ready)  # The second warpgroup updates its tiles meanwhile.

    @pl.when(s + 1 < steps)
    def _():
      plgpu.copy_gmem_to_smem(onehot_in.at[data, s + 1], onehot, tma.at[1])

    plgpu.wait_smem_to_gmem(1, wait_read_only=True)  # This buffer's copy of 2 steps ago
    sync()
    _store(met.at[parity, 0], jnp.log(total) + top - picked)
    _store(met.at[parity, 1], jnp.where(picked >= top, 1.0, 0.0))
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(met.at[parity], metrics_out.at[m, s])
    update(s, 0, split)
    return carry

  def first():  # The launch's inputs, the steps, W's first tiles, the outputs
    plgpu.copy_gmem_to_smem(wp_in.at[m], wp, tma.at[0])
    plgpu.copy_gmem_to_smem(onehot_in.at[data, 0], onehot, tma.at[1])
    plgpu.copy_gmem_to_smem(mask_in.at[m], mask, tma.at[2])
    for j in range(TILES):
      fetch_x(0, j)
    plgpu.barrier_wait(tma.at[0])
    plgpu.barrier_wait(tma.at[2])
    lax.fori_loop(0, steps, step, 0)
    if warpgroups == 2:
      plgpu.barrier_wait(w_done)  # The second warpgroup's tiles of the last step
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(wp, wp_out.at[m])
    plgpu.wait_smem_to_gmem(0)

  def second():  # W's tiles split .. 12: their update, and their part of the next forward
    def z_part():
      _store(zb, forward(split, TILES))
      plgpu.commit_smem()  # For the first warpgroup (before the arrival)

    def tiles(s, carry):
      plgpu.barrier_wait(dz_ready)
      update(s, split, TILES)
      pl.when(s + 1 < steps)(z_part)
      plgpu.barrier_arrive(w_done)
      return carry
    plgpu.barrier_wait(tma.at[0])  # W, copied in by the first warpgroup's request
    z_part()
    plgpu.barrier_arrive(w_done)
    lax.fori_loop(0, steps, tiles, 0)

  if warpgroups == 2:
    wg = lax.axis_index("wg")
    pl.when(wg == 0)(first)
    pl.when(wg == 1)(second)
  else:
    first()


@functools.lru_cache(maxsize=None)
def _call(steps: int, lr: float | None, parts: int, interpret: tuple | None = None,
          members: int = 1, batch_sets: int = 1):
  """The kernel for ``members`` networks, a CTA each (W, the mask rows and the metrics with a
  leading member axis; the batches with one of ``batch_sets``, member m on set m mod U); ``lr``
  None: each network's own, from row 1 of its mask rows. ``interpret``: None (compiled), else
  the items of Mosaic GPU's ``InterpretGPUParams``."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  warpgroups = WARPGROUPS
  layout_search.install()  # jax 0.11's inference (Warpgroup), the same answer sooner
  tiles = (plgpu.TilingTransform((8, 16)), plgpu.SwizzleTransform(32))
  return plgpu.kernel(
      functools.partial(_kernel, steps=steps, lr=lr, parts=parts, warpgroups=warpgroups,
                        ptx=interpret is None, batch_sets=batch_sets),
      out_type=(jax.ShapeDtypeStruct((members, PADDED, 3 * LANES), bf16),
                jax.ShapeDtypeStruct((members, steps, 2, BATCH), f32)),
      # A CTA a network: they share nothing but a set of batches; those that do not
      # fit on the GPU at once (one a SM: each takes most of its shared memory) wait for a free SM.
      grid=(members,), grid_names=("member",),
      num_threads=warpgroups, thread_name="wg",
      compiler_params=plgpu.CompilerParams(
          lowering_semantics=(getattr(plgpu.LoweringSemantics, SEMANTICS) if SEMANTICS
                              else cluster_mlp_mgpu.semantics()),
          unsafe_no_auto_barriers=NO_AUTO_BARRIERS),
      **({} if interpret is None else {"interpret": plgpu.InterpretGPUParams(**dict(interpret))}),
      scratch_types=[
          plgpu.SMEM((TILES, BATCH, 64), bf16, transforms=tiles),  # x, by tiles of 64 inputs
          plgpu.SMEM((PADDED, 3 * LANES), bf16, transforms=tiles),  # W's parts side by side
          plgpu.SMEM((BATCH, 3 * LANES), bf16, transforms=tiles),  # dz's parts side by side
          plgpu.SMEM((BATCH, LANES), f32),  # the second warpgroup's part of z
          plgpu.SMEM((BATCH, LANES), f32),  # the one-hot labels (0 and 1)
          # Row 0: 0 for a class, -inf for a padded one; row 1: a population's network's
          # learning rate (a copy moves at least 128 bytes: one a thread of the warpgroup)
          plgpu.SMEM((2, LANES), f32),
          plgpu.SMEM((2, 2, BATCH), f32),  # per-row losses and correct flags, by parity
          plgpu.Barrier(num_barriers=3),  # W, the labels, the mask
          plgpu.Barrier(num_barriers=TILES),  # x's tiles, one barrier each
          plgpu.Barrier(), plgpu.Barrier(),  # dz's parts written; the second's tiles done
      ])


def pack(params):
  """[{"w": (784, 10), "b": (10,)}] as the kernel's W: b as row 784, padded to (832, 16), its
  three bfloat16 parts side by side (input, part * 16 + class)."""
  w = jnp.concatenate([params[0]["w"], params[0]["b"][None]])
  w = jnp.pad(w, ((0, PADDED - INPUTS - 1), (0, LANES - CLASSES)))
  return jnp.concatenate(common.split3(w), axis=1)


def unpack(wp):
  hi, mid, lo = (wp[:, LANES * p:LANES * (p + 1)].astype(jnp.float32) for p in range(3))
  w = (hi + mid) + lo  # exact
  return [{"w": w[:INPUTS, :CLASSES], "b": w[INPUTS, :CLASSES]}]


def batches(x, labels, order, steps: int):
  """The epoch's batches as the kernel takes them: pixels as the MLP's kernel's
  (``cluster_mlp_mgpu.pixel_batches``: input 784 is 255, b's) and one-hot labels (steps, 64, 16)
  in float32 (loaded as the float32 sums of z are: a path of the MLP's kernel)."""
  idx = order[:steps * BATCH]
  onehot = jax.nn.one_hot(labels[idx], LANES, dtype=jnp.float32)
  return cluster_mlp_mgpu.pixel_batches(x, order, steps), onehot.reshape(steps, BATCH, LANES)


def _mask_rows(lr=0.0):
  """Row 0: 0 for the 10 classes, -inf for the padded ones; row 1: ``lr``."""
  mask = jnp.where(jnp.arange(LANES) < CLASSES, 0.0, -jnp.inf).astype(jnp.float32)
  return jnp.stack([mask, jnp.full((LANES,), lr, jnp.float32)])


def _interpret_items(interpret) -> tuple | None:
  return None if interpret is False else tuple(sorted(dict(
      {} if interpret is True else interpret).items()))


def _launch(call, params, masks, xs, onehot):
  """``call`` on stacked params, mask rows, batches and labels: the members' params, losses
  (members, steps) and correct counts (members, steps)."""
  wp, metrics = call(jax.vmap(pack)(params), masks, xs, onehot)
  return (jax.vmap(unpack)(wp), *common.step_metrics(metrics))


def train_steps(params, xs, onehot, lr: float, precision: str = "float32",
                interpret: bool | dict = False):
  """``steps`` SGD steps in one launch on the batches of ``batches``. Returns (params, losses
  (steps,), correct counts (steps,)), each step's before its update. Hopper only, or
  ``interpret``: Mosaic GPU's interpreter on the CPU (jax 0.11 and newer), True or a dict of
  its ``InterpretGPUParams`` (e.g. ``{"detect_races": True}``)."""
  call = _call(xs.shape[0], float(lr), PARTS[precision], _interpret_items(interpret))
  one = lambda a: a[None]  # A population of one; its learning rate is the kernel's constant.
  params, losses, correct = _launch(call, jax.tree.map(one, params), one(_mask_rows()),
                                    one(xs), one(onehot))
  return jax.tree.map(lambda a: a[0], params), losses[0], correct[0]


def train_population(params, xs, onehot, lrs, precision: str = "float32",
                     interpret: bool | dict = False, twin: bool = False):
  """A population's ``steps`` SGD steps in one launch, a CTA a network: params stacked on a
  leading member axis, U sets of batches of ``batches`` stacked (U a divisor of the members:
  member m trains on set m mod U; 1: all on the same batches; the members: each its own), and
  each member's learning rate ``lrs`` (members,). Returns (params, losses (members, steps),
  correct counts (members, steps)); a member's numbers are those of ``train_steps`` alone on its
  batches at its learning rate. ``twin``: ``reference`` for each member in the kernel's place
  (the CPU tests of what is around it)."""
  members, batch_sets = lrs.shape[0], xs.shape[0]
  if members % batch_sets:
    raise ValueError(f"{batch_sets} sets of batches do not divide {members} members")
  if twin:
    dtype = params[0]["w"].dtype
    data = lambda a: a[jnp.arange(members) % batch_sets].astype(dtype)
    return jax.vmap(reference)(params, data(xs), data(onehot), lrs)
  call = _call(xs.shape[1], None, PARTS[precision], _interpret_items(interpret), members,
               batch_sets)
  return _launch(call, params, jax.vmap(_mask_rows)(lrs), xs, onehot)


def train_epoch(params, x, labels, order, lr: float, *, steps: int, precision: str = "float32"):
  """One epoch: ``steps`` batches of ``x`` (N, 784) uint8 pixels and integer ``labels`` (N,)
  gathered in ``order``, then ``train_steps``. Returns (params, losses, correct counts)."""
  xs, onehot = batches(x, labels, order, steps)
  return train_steps(params, xs, onehot, lr, precision)


def reference(params, xs, onehot, lr: float):
  """The plain-jnp twin of ``train_steps``: the same steps at params' dtype's full precision,
  the pixels' 1/255 applied after the product (b in it, as W's row 784)."""
  hi = lax.Precision.HIGHEST
  dtype = params[0]["w"].dtype
  w = jnp.concatenate([params[0]["w"], params[0]["b"][None],
                       jnp.zeros((PADDED - INPUTS - 1, CLASSES), dtype)])

  def step(w, batch):
    x, t = batch[0].astype(dtype), batch[1][:, :CLASSES].astype(dtype)
    z = jnp.dot(x, w, precision=hi) / 255.0
    top = jnp.max(z, axis=1, keepdims=True)
    e = jnp.exp(z - top)
    total = jnp.sum(e, axis=1, keepdims=True)
    picked = jnp.sum(t * z, axis=1, keepdims=True)
    loss = jnp.mean(jnp.log(total) + top - picked)
    correct = jnp.sum(picked >= top)
    dz = (e / total - t) / BATCH
    return w - lr * jnp.dot(x.T, dz, precision=hi) / 255.0, (loss, correct)

  w, (losses, correct) = lax.scan(step, w, (xs, onehot))
  return [{"w": w[:INPUTS], "b": w[INPUTS]}], losses, correct.astype(jnp.int32)
