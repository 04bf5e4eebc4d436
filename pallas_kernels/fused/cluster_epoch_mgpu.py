"""The regression net's epoch in one thread-block cluster (Pallas Mosaic GPU, Hopper).

The network is 32 -> H (ReLU) -> 1 with no biases, mean squared error and plain SGD, batch
256: the project's regression workload. One launch runs every step of an epoch in one cluster
of (H / 64) x 2 CTAs, one warpgroup each. CTA (u, b) owns hidden units 64u .. 64u + 63 (its
rows of W0^T and entries of w1, kept in registers for the whole launch) and the batch's rows
128b .. 128b + 127. A step, in each CTA:

  forward    z = x[rows] W0[:, units], a (128, 64) wgmma product; the partial outputs
             (relu(z) times w1, summed over the CTA's units: along z's rows, within each
             warp) and the mask [z > 0] into its shared memory
  exchange 1 a barrier of the CTAs that share b; each reads their partials (distributed shared
             memory) and adds them in u order, so all hold the same bits of the outputs
  backward   m = h^T x with h = [z > 0] dL/dout, a (64, 32) wgmma product over the CTA's
             rows, taken as live^T (dL/dout x): the 0/1 mask live = [z > 0], read
             transposed, times the rows of x scaled by dL/dout
  exchange 2 a barrier of the pair (u, 0), (u, 1); each adds its own and its peer's m (a + b
             == b + a in IEEE arithmetic: both get the same bits) and updates with
             dW0^T = w1 m (row by row) and dw1 = the row sums of W0^T m

Why m: dW0^T = (w1 h^T) x, and dw1 = relu(z)^T dL/dout = sum over rows of h^T (W0^T x^T),
which is the row sums of W0^T m. So the step's element-wise work on (128, 64) arrays is z's
partial outputs and the mask, and one (64, 32) array is exchanged instead of two gradients.
Why z and not z^T: a sum over the units of z^T (units by rows) crosses the warpgroup's four
warps through shared memory, a sum over z's stays in each warp; and the backward's product
reads the mask transposed from shared memory, which bfloat16 wgmma can (TF32 cannot).

The two exchanges alternate between two buffers by step parity, so one barrier each suffices:
a CTA writes a buffer again only two steps later, after a barrier its readers passed once done.

Products keep float32's accuracy. The forward runs as 3xTF32 (``dense_mgpu.split_tf32``:
a = hi + lo, a b ~ hi hi + hi lo + lo hi); TF32 wgmma takes both operands K-major, so x comes
split into hi and lo by XLA before the launch. The backward runs in bfloat16, exactly: the
mask is 0 or 1, the scaled rows are split into three bfloat16 parts (8 + 8 + 8 bits of
float32's 24), and bfloat16 wgmma takes both in the layout they are stored in (the mask
transposed, the rows row-major), so neither x^T nor h is ever formed. The batch comes by TMA a
step ahead. The CTAs of u = 0 write each step's outputs; the losses are their squared errors'
means, added up after the launch in a fixed order (``common.fixed_order_mean``).

A wider hidden layer, H = 512 G for G = 2 .. ``CHECKED_CLUSTERS``, trains in
G clusters of 16 CTAs, one launch: cluster g owns units 512g .. 512g + 511. Exchange 1 then
goes on across the clusters: each CTA writes its cluster's sum of its half's outputs to global
memory, all CTAs meet at a grid barrier (``pallas_kernels.mgpu.grid_barrier``: all must be
resident at once), and each adds the G clusters' sums in cluster order; exchange 2 stays in
the cluster (a pair shares its units).

Why this layout: docs/design/cluster_kernels.md. Mosaic GPU's
interpreter (jax 0.11.2) does not model reads of a peer's shared memory, so the CPU tests lower
the kernel without running it and check ``reference``, its plain-jnp twin, against float64;
``experiments.check_kernels --only=cluster`` checks the kernel itself on a Hopper GPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.mgpu import grid_barrier
from pallas_kernels.ops.dense_mgpu import load as _load, split3, split_tf32

BATCH = 256
INPUTS = 32  # One 128-byte swizzled row of float32: the only input width the tiles take.
UNITS = 64  # Hidden units a CTA: wgmma's M.
ROWS = BATCH // 2  # Batch rows a CTA.
MAX_CTAS = 16  # The largest cluster Hopper launches (non-portable above 8).
CLUSTER_UNITS = MAX_CTAS // 2 * UNITS  # A cluster's units: a wider layer takes several.
# The most clusters a network takes: the most checked on a GPU (check_kernels --only=cluster,
# 2026-11-27). More lower the same way, up to grid_barrier.resident_clusters(), not yet run.
CHECKED_CLUSTERS = 2
PHASES = ("split_w", "wait_x", "forward", "partials", "exchange_1", "wait_xy", "backward",
          "exchange_2", "update")  # Named scopes, for Mosaic GPU's profiler.


def problem(widths, batch: int, *, bias: bool, optimizer: str, dtype) -> str | None:
  """Why this kernel cannot train the network (one line), or None if it can."""
  hidden = widths[1] if len(widths) == 3 else None
  if len(widths) != 3 or widths[0] != INPUTS or widths[2] != 1:
    return f"it trains {INPUTS}-H-1 networks, not {'-'.join(map(str, widths))}"
  most = CLUSTER_UNITS * min(CHECKED_CLUSTERS, grid_barrier.resident_clusters())
  if hidden % UNITS or not UNITS <= hidden <= most or (hidden > CLUSTER_UNITS
                                                       and hidden % CLUSTER_UNITS):
    wider = (f", or of {CLUSTER_UNITS} up to {most} (a cluster each)" if most > CLUSTER_UNITS
             else "")
    return (f"its hidden width must be a multiple of {UNITS} up to {CLUSTER_UNITS} (two CTAs a "
            f"{UNITS} units, at most {MAX_CTAS} in a cluster){wider}, not {hidden}")
  return common.plain_sgd_problem(batch, BATCH, bias=bias, optimizer=optimizer, dtype=dtype)


def _kernel(w0t_in, w1_in, xh_in, xl_in, xf_in, y_in,  # inputs (global memory)
            w0t_out, w1_out, out_out,  # outputs
            *refs,  # (clusters > 1: the clusters' sums, an output) and the scratch
            steps: int, lr: float, groups: int, clusters: int = 1):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  sums, refs = (refs[0], refs[1:]) if clusters > 1 else (None, refs)
  (xh, xl, xf, gx0, gx1, gx2, live, wh, wl, y, w1_buf, part0, part1, m0, m1, outs, dout, tma,
   group_barrier, pair_barrier, *across) = refs
  f32 = jnp.float32
  by_unit = plgpu.Layout.WGMMA.reduce(1)  # (64,): one value a unit (a row of W0^T and m)
  by_col = plgpu.Layout.WGMMA.reduce(0)  # (64,): one value a unit (a column of z)
  by_row_of_x = plgpu.Layout.WGMMA.reduce(1)  # (128,): one value a row of x (128, 32)
  u, b = lax.axis_index("unit"), lax.axis_index("half")
  g = lax.axis_index("cluster") if clusters > 1 else 0
  units = pl.ds((g * groups + u) * UNITS if clusters > 1 else u * UNITS, UNITS)
  if clusters > 1:
    mine, inbox = across  # This CTA's sum of its cluster's outputs; every cluster's
    counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))  # The grid barrier's arrivals
  # Whole buffers by parity: jax 0.11.2 cannot lower a peer's view of one row of a buffer.
  part, m_buf = (part0, part1), (m0, m1)
  gx_parts = (gx0, gx1, gx2)

  def fetch_x(s):  # The forward's operands of step s.
    plgpu.copy_gmem_to_smem(xh_in.at[s, b], xh, tma.at[0])
    plgpu.copy_gmem_to_smem(xl_in.at[s, b], xl, tma.at[1])

  def fetch_xy(s):  # The backward's.
    plgpu.copy_gmem_to_smem(xf_in.at[s, b], xf, tma.at[2])
    plgpu.copy_gmem_to_smem(y_in.at[s, b], y, tma.at[3])

  plgpu.copy_gmem_to_smem(w0t_in.at[units], wh, tma.at[4])
  plgpu.copy_gmem_to_smem(w1_in.at[units], w1_buf, tma.at[5])
  plgpu.barrier_wait(tma.at[4])
  plgpu.barrier_wait(tma.at[5])
  w0t, w1 = wh[...], _load(w1_buf, by_unit)
  fetch_x(0)
  fetch_xy(0)

  def step(s, parity, carry):
    w0t, w1 = carry
    with jax.named_scope("split_w"):
      wh[...], wl[...] = split_tf32(w0t)
      w1_buf[...] = w1  # For the partial outputs, in z's column layout.
      plgpu.commit_smem()  # Visible to the tensor cores.
    with jax.named_scope("wait_x"):
      plgpu.barrier_wait(tma.at[0])
      plgpu.barrier_wait(tma.at[1])

    def forward(acc):  # 3xTF32: hi hi + hi lo + lo hi
      for w_, x_ in ((wh, xh), (wh, xl), (wl, xh)):
        plgpu.wgmma(acc, x_, w_.transpose((1, 0)))
      plgpu.wgmma_wait(0)
      return acc[...]
    with jax.named_scope("forward"):
      z = pl.run_scoped(forward, plgpu.ACC((ROWS, UNITS), f32))

    @pl.when(s + 1 < steps)
    def _():
      fetch_x(s + 1)

    with jax.named_scope("partials"):
      w1_rows = lax.broadcast_in_dim(_load(w1_buf, by_col), (ROWS, UNITS), [1])
      part[parity][...] = jnp.sum(jnp.maximum(z, 0.0) * w1_rows, axis=1)
      live[...] = jnp.where(z > 0.0, 1.0, 0.0).astype(jnp.bfloat16)
    with jax.named_scope("exchange_1"):
      plgpu.barrier_arrive(group_barrier.at[parity])
      plgpu.barrier_wait(group_barrier.at[parity])
      out = plgpu.cluster_ref(part[parity], {"unit": 0})[...]
      for peer in range(1, groups):  # A fixed order: every CTA gets the same bits.
        out = out + plgpu.cluster_ref(part[parity], {"unit": peer})[...]
      if clusters > 1:  # Then the clusters' sums, in cluster order. A slot by step parity is
        # written again two steps later, after the next step's barrier, which every reader
        # reaches only after reading it.
        mine[...] = out
        grid_barrier.share(counter.at[0], (s + 1) * clusters * groups * 2, mine,
                           sums.at[parity, g, u, b], sums.at[parity, :, 0, b], inbox, tma.at[6])
        out = inbox[0]
        for other in range(1, clusters):
          out = out + inbox[other]
      plgpu.barrier_wait(tma.at[3])
      dout[...] = (out - y[...]) * (2.0 / BATCH)

      @pl.when((u == 0) & (g == 0) if clusters > 1 else u == 0)  # The first cluster's
      def _():
        plgpu.wait_smem_to_gmem(1, wait_read_only=True)  # This buffer's copy of 2 steps ago.
        outs.at[parity][...] = out
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(outs.at[parity], out_out.at[s, b])
      g_out = _load(dout, by_row_of_x)
    with jax.named_scope("wait_xy"):
      plgpu.barrier_wait(tma.at[2])

    def backward(acc):  # m = live^T (dL/dout x): dW0^T = w1 m, dw1 = sum(W0^T m)
      gx = _load(xf, plgpu.Layout.WGMMA) * lax.broadcast_in_dim(g_out, (ROWS, INPUTS), [0])
      for ref, bits in zip(gx_parts, split3(gx)):  # gx, exactly, in three bfloat16 parts
        ref[...] = bits
      plgpu.commit_smem()
      for ref in gx_parts:
        plgpu.wgmma(acc, live.transpose((1, 0)), ref)
      plgpu.wgmma_wait(0)
      return acc[...]
    with jax.named_scope("backward"):
      m = pl.run_scoped(backward, plgpu.ACC((UNITS, INPUTS), f32))

    @pl.when(s + 1 < steps)
    def _():
      fetch_xy(s + 1)

    with jax.named_scope("exchange_2"):
      m_buf[parity][...] = m
      plgpu.barrier_arrive(pair_barrier.at[parity])
      plgpu.barrier_wait(pair_barrier.at[parity])
      m = m + plgpu.cluster_ref(m_buf[parity], {"half": 1 - b})[...]
    with jax.named_scope("update"):
      dw1 = jnp.sum(w0t * m, axis=1)
      return w0t - lr * (lax.broadcast_in_dim(w1, m.shape, [0]) * m), w1 - lr * dw1

  def two_steps(i, carry):
    carry = step(2 * i, 0, carry)
    return step(2 * i + 1, 1, carry)

  carry = lax.fori_loop(0, steps // 2, two_steps, (w0t, w1))
  if steps % 2:
    carry = step(steps - 1, 0, carry)
  w0t, w1 = carry
  # No CTA leaves while a peer may still read its buffers.
  plgpu.barrier_arrive(group_barrier.at[0])
  plgpu.barrier_wait(group_barrier.at[0])
  plgpu.barrier_arrive(pair_barrier.at[0])
  plgpu.barrier_wait(pair_barrier.at[0])

  @pl.when(b == 0)  # Both CTAs of a pair hold the same weights.
  def _():
    wh[...] = w0t
    w1_buf[...] = w1
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(wh, w0t_out.at[units])
    plgpu.copy_smem_to_gmem(w1_buf, w1_out.at[units])
  plgpu.wait_smem_to_gmem(0)


def _clusters(hidden: int) -> int:
  """The clusters of 16 CTAs a hidden layer of ``hidden`` units takes."""
  return max(1, hidden // CLUSTER_UNITS)


@functools.lru_cache(maxsize=None)
def _call(hidden: int, steps: int, lr: float, profile_dir: str | None = None):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32 = jnp.float32
  tiled = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(128))
  tiled16 = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(64))
  smem = functools.partial(plgpu.SMEM, dtype=f32)
  params = {}
  if profile_dir:
    params.update(profile_space=len(PHASES) * 3 * steps, profile_dir=profile_dir)
  clusters = _clusters(hidden)
  if hidden % UNITS or (clusters > 1 and hidden % CLUSTER_UNITS):  # (problem() says so first)
    raise ValueError(f"hidden width {hidden}: a multiple of {UNITS} up to {CLUSTER_UNITS}, or "
                     f"of {CLUSTER_UNITS} beyond")
  grid_barrier.check_resident(clusters)
  if clusters > 1 and profile_dir:
    raise ValueError("the profiler takes one cluster")
  groups = hidden // UNITS // clusters  # Unit CTAs a cluster
  across = [smem((ROWS,)), smem((clusters, ROWS))] if clusters > 1 else []  # mine, inbox
  return plgpu.kernel(
      functools.partial(_kernel, steps=steps, lr=lr, groups=groups, clusters=clusters),
      out_type=(jax.ShapeDtypeStruct((hidden, INPUTS), f32), jax.ShapeDtypeStruct((hidden,), f32),
                jax.ShapeDtypeStruct((steps, 2, ROWS), f32))
               # The clusters' sums by step parity, cluster, unit CTA, half (read back)
               + ((jax.ShapeDtypeStruct((2, clusters, groups, 2, ROWS), f32),) if clusters > 1
                  else ()),
      grid=(clusters,), grid_names=("cluster",), cluster=(groups, 2),
      cluster_names=("unit", "half"),
      compiler_params=plgpu.CompilerParams(**params),
      scratch_types=[
          smem((ROWS, INPUTS), transforms=tiled), smem((ROWS, INPUTS), transforms=tiled),  # x parts
          smem((ROWS, INPUTS), transforms=tiled),  # x
          *[plgpu.SMEM((ROWS, INPUTS), jnp.bfloat16, transforms=tiled16) for _ in range(3)],  # gx
          plgpu.SMEM((ROWS, UNITS), jnp.bfloat16, transforms=tiled16),  # the mask [z > 0]
          smem((UNITS, INPUTS), transforms=tiled), smem((UNITS, INPUTS), transforms=tiled),  # W0^T
          smem((ROWS,)), smem((UNITS,)),  # y, w1
          smem((ROWS,)), smem((ROWS,)),  # partial outputs, by parity
          smem((UNITS, INPUTS), transforms=tiled),
          smem((UNITS, INPUTS), transforms=tiled),  # m, by parity
          smem((2, ROWS)), smem((ROWS,)),  # outputs for the copy out; dL/dout
          plgpu.Barrier(num_barriers=7 if clusters > 1 else 6),  # The 7th: the sums' copy in
          plgpu.ClusterBarrier(collective_axes=("unit",), num_barriers=2),
          plgpu.ClusterBarrier(collective_axes=("half",), num_barriers=2),
          *across,
      ])


def train_steps(w0, w1, xs, ys, lr: float, profile_dir: str | None = None):
  """``steps`` SGD steps in one launch: w0 (32, H), w1 (H,), xs (steps, 256, 32), ys (steps,
  256) float32. Returns (w0, w1, losses), losses (steps,) each step's mean squared error before
  its update. Hopper only; ``profile_dir`` adds Mosaic GPU's profiler (a few steps only: its
  buffer shares shared memory with the kernel's)."""
  steps, hidden = xs.shape[0], w0.shape[1]
  xh, xl = split_tf32(xs)
  halves = lambda a: a.reshape(steps, 2, ROWS, INPUTS)
  call = _call(hidden, steps, float(lr), profile_dir)
  w0t, w1, outs, *_ = call(w0.T, w1, halves(xh), halves(xl), halves(xs),
                           ys.reshape(steps, 2, ROWS))
  sq = jnp.square(outs.reshape(steps, BATCH) - ys)
  return w0t.T, w1, jax.vmap(common.fixed_order_mean)(sq)  # The same bits in every process.


def reference(w0, w1, xs, ys, lr: float):
  """The plain-jnp twin of ``train_steps``: the same steps, products at ``w0``'s dtype's full
  precision, outputs summed over the 64-unit groups in order and the gradients taken through
  m, as the kernel does (a wider layer: summed in each cluster so, then over the clusters in
  order)."""
  hi = lax.Precision.HIGHEST
  clusters = _clusters(w0.shape[1])
  groups = w0.shape[1] // UNITS // clusters

  def step(carry, xy):
    w0, w1 = carry
    x, y = xy
    z = jnp.dot(x, w0, precision=hi)
    h = jnp.maximum(z, 0.0)
    parts = jnp.sum((h * w1).reshape(-1, clusters, groups, UNITS), axis=3)
    sums = []
    for k in range(clusters):
      sums.append(parts[:, k, 0])
      for c in range(1, groups):
        sums[k] = sums[k] + parts[:, k, c]
    out = functools.reduce(jnp.add, sums)
    r = out - y
    g_out = r * (2.0 / y.shape[0])
    m = jnp.dot(x.T, jnp.where(z > 0, g_out[:, None], 0.0), precision=hi)  # (32, H)
    dw1 = jnp.sum(w0 * m, axis=0)
    return (w0 - lr * (m * w1), w1 - lr * dw1), jnp.mean(r * r)

  (w0, w1), losses = lax.scan(step, (w0, w1), (xs, ys))
  return w0, w1, losses


def train_epoch(params, x, y, order, lr: float, *, steps: int, use_kernel: bool):
  """One epoch: params [{"w": (32, H)}, {"w": (H, 1)}], x (N, 32), y (N,) or (N, 1), order
  (>= steps * 256,). Returns (params, per-step losses). ``use_kernel``: the cluster kernel
  (Hopper), else ``reference``."""
  idx = order[:steps * BATCH]
  xs = x[idx].astype(jnp.float32).reshape(steps, BATCH, INPUTS)
  ys = y[idx].astype(jnp.float32).reshape(steps, BATCH)
  w0, w1 = params[0]["w"], params[1]["w"][:, 0]
  run = train_steps if use_kernel else reference
  w0, w1, losses = run(w0, w1, xs, ys, lr)
  return [{"w": w0}, {"w": w1[:, None]}], losses

