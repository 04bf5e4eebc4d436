"""Dense products on Hopper's tensor cores: ``C = A @ B^T`` through Pallas' Mosaic GPU backend.

Both operands are K-major, A as (M, K) and B as (N, K), because TF32 warpgroup MMAs (wgmma)
take no other layout (only 16-bit types may be transposed); bfloat16 takes the same layout
here. That fits the dense layer of a large batch:

  forward   y = relu(x @ W)      A = x (M, K), B = W^T (N, K)
  dw        dW = x^T @ g         A = x^T (K, M), B = g^T (N, M): both transposed, the batch is K

The kernel follows JAX's Hopper matmul (``jax.experimental.pallas.ops.gpu.hopper_matmul_mgpu``):
one CTA an SM, looping over output tiles; a memory warpgroup streams A's and B's K slices into
shared memory by TMA, several steps ahead; two compute warpgroups each own half of the CTA's
tile (tile_m x tile_n each, side by side in N) and accumulate with wgmma; the epilogue adds
the bias and applies ReLU in registers and stores the tile through shared memory by TMA.
float32 accuracy comes as 3xTF32: A and B given as (hi, lo) pairs (``split_tf32``), three
wgmma a K step into an accumulator of their own, added to the tile's sum in float32.

``splits`` cuts K into equal runs, each its own tile of work, written as partial sums
(splits, M, N) for the caller to add up in a fixed order: dW has few output tiles (784 x 256
is 13 of 64 x 256) and a long K (the batch), so without splits most SMs would idle.

Any M, N, K of at least a tile work (K a multiple of 8 floats, M and N of 8: ``check_shapes``):
the last tiles reach past the edges, where TMA reads zeros and clips the stores, so nothing
is padded in memory. GPU only (Hopper): the CPU tests
lower it without running it, and run the layer around it with ``reference`` in its place.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.common import split3  # noqa: F401 (the cluster kernels take it from here)


@dataclasses.dataclass(frozen=True)
class Tiles:
  tile_m: int = 128  # rows of C a compute warpgroup owns (wgmma's M: a multiple of 64)
  tile_n: int = 64  # columns of C a compute warpgroup owns; the CTA's tile is 2 * tile_n wide
  tile_k: int = 32  # one TMA step of K: 32 float32 are one 128-byte swizzled row
  stages: int = 4  # K steps in flight
  splits: int = 1  # K cut into this many runs, each written as a partial C


def reference(a, b, bias=None, *, relu=False, tiles: Tiles = Tiles()):
  """The plain-jnp twin of ``matmul_nt``, exact float32 products: the partial products of
  ``tiles.splits`` runs of K."""
  a, b = (sum(v) if isinstance(v, tuple) else v for v in (a, b))  # hi + lo == x exactly
  splits, k = tiles.splits, a.shape[1]
  run = pl.cdiv(pl.cdiv(k, tiles.tile_k), splits) * tiles.tile_k  # as the kernel cuts K
  pad = ((0, 0), (0, splits * run - k))
  a3 = jnp.pad(a.astype(jnp.float32), pad).reshape(a.shape[0], splits, run)
  b3 = jnp.pad(b.astype(jnp.float32), pad).reshape(b.shape[0], splits, run)
  c = jnp.einsum("msk,nsk->smn", a3, b3, precision=lax.Precision.HIGHEST)
  c = c if bias is None else c + bias
  c = jax.nn.relu(c) if relu else c
  return c if splits > 1 else c[0]


def check_shapes(a_shape, b_shape, dtype, tiles: Tiles):
  """Why a (M, K) and b (N, K) of ``dtype`` do not fit the kernel (one line), or None. Any M,
  N, K of at least a tile work: TMA fills what lies past an edge with zeros and clips stores
  there. TMA's tiled copies want K a multiple of a swizzled row (32 bytes at least: 8 floats)
  and M, N multiples of its 8-row tiles."""
  (m, k), (n, k2) = a_shape, b_shape
  if k != k2:
    return f"a (M, K) and b (N, K) must share K, not {a_shape} and {b_shape}"
  if m < tiles.tile_m or n < 2 * tiles.tile_n or k < tiles.tile_k:
    return (f"(M, N, K) = {(m, n, k)} is smaller than a tile ({tiles.tile_m}, "
            f"{2 * tiles.tile_n}, {tiles.tile_k}): pad it")
  itemsize = jnp.dtype(dtype).itemsize
  if _swizzle(k, tiles.tile_k, itemsize) is None:
    return (f"K = {k} of {jnp.dtype(dtype)}: must be a multiple of {32 // itemsize} "
            "(32 bytes, TMA's smallest swizzled row)")
  if m % 8 or n % 8:  # n % 8 == 0 also gives C's stores a swizzle.
    return f"M = {m} and N = {n} must be multiples of 8 (TMA's tiles of 8 rows)"
  return None


def _swizzle(k: int, tile_k: int, itemsize: int) -> int | None:
  """The widest shared-memory swizzle (bytes) whose row of elements divides both the K step
  and K itself: TMA's tiled copies want the whole array's K a multiple of it (784 floats: 64)."""
  for swizzle in (128, 64, 32):
    elems = swizzle // itemsize
    if tile_k % elems == 0 and k % elems == 0:
      return swizzle
  return None


def _kernel(*refs, tiles: Tiles, relu: bool, x3: bool, has_bias: bool):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  n_in = 4 if x3 else 2  # a, b; or a_hi, a_lo, b_hi, b_lo
  ins, c_gmem = refs[:n_in], refs[-1]
  bias_gmem = refs[n_in] if has_bias else None
  a_gmem, b_gmem = ins[0], ins[n_in // 2]
  m, k = a_gmem.shape
  n = b_gmem.shape[0]
  tile_m, tile_n, tile_k, splits = tiles.tile_m, tiles.tile_n, tiles.tile_k, tiles.splits
  itemsize = jnp.dtype(a_gmem.dtype).itemsize
  swizzle = _swizzle(k, tile_k, itemsize)
  transforms = (plgpu.TilingTransform((8, swizzle // itemsize)), plgpu.SwizzleTransform(swizzle))
  out_swizzle = _swizzle(n, tile_n, 4)
  out_transforms = (plgpu.TilingTransform((8, out_swizzle // 4)),
                    plgpu.SwizzleTransform(out_swizzle))
  cta_n = 2 * tile_n
  m_tiles, n_tiles = pl.cdiv(m, tile_m), pl.cdiv(n, cta_n)
  k_run = pl.cdiv(pl.cdiv(k, tile_k), splits) * tile_k  # The last run may reach past K.

  def pipeline(body, context):
    return plgpu.emit_pipeline_warp_specialized(
        body, grid=(k_run // tile_k,), memory_registers=40,
        in_specs=[plgpu.BlockSpec((tile_m, tile_k), lambda kk: (0, kk), transforms=transforms)]
        * (n_in // 2)
        + [plgpu.BlockSpec((cta_n, tile_k), lambda kk: (0, kk), transforms=transforms)]
        * (n_in // 2),
        wg_axis="wg", num_compute_wgs=2, max_concurrent_steps=tiles.stages,
        compute_context=context)

  ignore = lambda *_, **__: None

  @functools.partial(
      pl.run_scoped,
      allocs=pipeline(ignore, ignore).get_allocations(*ins),
      out_smem=plgpu.SMEM((2, tile_m, tile_n), jnp.float32, transforms=out_transforms),
      bias_smem=plgpu.SMEM((2, tile_n), jnp.float32),
      bias_arrived=plgpu.Barrier(num_barriers=2),
      collective_axes="wg")
  def _scope(allocs, out_smem, bias_smem, bias_arrived):
    wg = lax.axis_index("wg")

    @plgpu.nd_loop((splits * m_tiles * n_tiles,), collective_axes="sm")
    def _tile_loop(info):
      (t,) = info.index
      s, mn = lax.div(t, m_tiles * n_tiles), lax.rem(t, m_tiles * n_tiles)
      mi, ni = lax.div(mn, n_tiles), lax.rem(mn, n_tiles)
      rows = pl.ds(mi * tile_m, tile_m)  # Past the edges, TMA reads zeros and clips stores.
      ks = pl.ds(s * k_run, k_run)

      cols = pl.ds(ni * cta_n + wg * tile_n, tile_n)  # This warpgroup's columns of C.

      def fetch_bias():  # Fetched while the products run.
        if bias_gmem is not None:
          plgpu.copy_gmem_to_smem(bias_gmem.at[cols], bias_smem.at[wg], bias_arrived.at[wg])

      def finish(acc):  # Bias, ReLU, the tile out
        if bias_gmem is not None:
          plgpu.barrier_wait(bias_arrived.at[wg])
          acc = acc + lax.broadcast_in_dim(bias_smem[wg], (tile_m, tile_n), [1])
        if relu:
          acc = jnp.maximum(acc, 0.0)
        plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # The last tile's store has left.
        out_smem[wg] = acc
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(
            out_smem.at[wg],
            c_gmem.at[s, rows, cols])

      def context(run_pipeline):
        if x3:  # The tile's sum in registers, each K step's products added to it
          fetch_bias()
          finish(run_pipeline(plgpu.layout_cast(jnp.zeros((tile_m, tile_n), jnp.float32),
                                                plgpu.Layout.WGMMA)))
          return

        @functools.partial(pl.run_scoped, acc_ref=plgpu.ACC((tile_m, tile_n), jnp.float32))
        def _acc(acc_ref):  # One accumulator over all of K
          fetch_bias()
          run_pipeline(acc_ref)
          finish(acc_ref[...])

      def mma(_, *smem_and_acc):
        *smem, acc = smem_and_acc
        bt = [r.at[pl.ds(wg * tile_n, tile_n)].transpose((1, 0)) for r in smem[n_in // 2:]]
        if not x3:  # tf32 or bfloat16: one accumulator over K (their error is far larger)
          plgpu.wgmma(acc, smem[0], bt[0])
          plgpu.wgmma_wait(0)
          return acc

        def products(acc_ref):  # hi lo + lo hi + hi hi: float32's accuracy from three TF32
          # products, in an accumulator of their own: the tensor cores round each sum toward
          # zero, and one accumulator over all of K (300 sums at K = 784) was 5.8e-6 to 7.5e-6
          # from float64 where this is 4.4e-7, XLA's float32 dot 5.0e-7 (an H200, 2026-11-29)
          plgpu.wgmma(acc_ref, smem[0], bt[1])
          plgpu.wgmma(acc_ref, smem[1], bt[0])
          plgpu.wgmma(acc_ref, smem[0], bt[0])
          plgpu.wgmma_wait(0)
          return acc_ref[...]
        return acc + pl.run_scoped(products, plgpu.ACC((tile_m, tile_n), jnp.float32))

      blocks = [r.at[rows, ks] for r in ins[:n_in // 2]]
      blocks += [r.at[pl.ds(ni * cta_n, cta_n), ks] for r in ins[n_in // 2:]]
      pipeline(mma, context)(*blocks, allocations=allocs)

  plgpu.wait_smem_to_gmem(0, wait_read_only=True)


def split_tf32(x):
  """float32 x as hi + lo, exactly: hi with TF32's 10 mantissa bits (the low 13 of float32's 23
  cleared), so a TF32 product of hi loses nothing, and lo = x - hi keeps the rest. Plain jnp:
  it runs in XLA and inside Mosaic GPU kernels alike."""
  bits = lax.bitcast_convert_type(x, jnp.int32) & jnp.int32(-8192)  # 0xFFFFE000
  hi = lax.bitcast_convert_type(bits, jnp.float32)
  return hi, x - hi


def load(ref, layout, layout_given: bool = False):
  """``plgpu.load`` of a whole shared-memory ref into ``layout`` (for the cluster kernels): jax
  0.10 wants an index, later versions take none. ``layout_given`` (Warpgroup semantics, on the
  GPU; a 1-D ref of this CTA's shared memory, other refs load as without it): the load in Mosaic
  GPU's own terms (``plgpu.inline_mgpu``), its layout given. There ``plgpu.load`` is a load of
  any layout and a cast, and Mosaic GPU's layout inference guesses each such load's layout, a
  reduction of the kernel's whole constraint system each guess (the cluster MLP's lowering on
  the CPU, jax 0.11.2: 9.0 -> 5.6 s; the same results on the H100). Not in the interpreter."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  if layout_given and len(ref.shape) == 1:
    from jax.experimental.mosaic import gpu as mgpu
    mgpu_layout = layout.to_mgpu()

    @plgpu.inline_mgpu(arg_types=(plgpu.RefType(),),
                       return_type=plgpu.ShapeDtypeStruct(ref.shape, ref.dtype, layout))
    def emit(ctx, smem):
      return mgpu.FragmentedArray.load_untiled(smem, layout=mgpu_layout, optimized=False)
    return emit(ref)
  if "idx" in inspect.signature(plgpu.load).parameters:
    return plgpu.load(ref, (), layout=layout, optimized=False)
  return plgpu.load(ref, layout=layout, optimized=False)


def split3_in_kernel(a, ptx: bool):
  """``split3`` inside a Mosaic GPU kernel (the cluster kernels, logreg_mgpu): on the GPU
  (``ptx``) by the hardware's conversion (round to nearest even, as split3's integer rounding)
  and back, fewer instructions (a faster float32 step, the same bits). split3 rounds in
  integers because XLA drops a float32 -> bfloat16 -> float32 round trip; the interpreter runs
  through XLA, so it keeps split3."""
  if not ptx:
    return split3(a)
  parts = []
  for _ in range(3):
    parts.append(a.astype(jnp.bfloat16))
    a = a - parts[-1].astype(jnp.float32)  # exact: what is left has at most 16 (then 8) bits
  return parts


def warpgroup_sync(ptx: bool) -> None:
  """A barrier of the warpgroup inside a Mosaic GPU kernel (the cluster kernels, logreg_mgpu),
  where its threads hand data to each other or the tensor cores' or a copy's reads must end
  before threads or a copy write the same memory: on the GPU (``ptx``) ``commit_smem`` without
  its proxy fence, which only threads' stores read by the tensor cores or a copy need (a faster
  step than with the fence); PTX, so the interpreter takes ``commit_smem`` itself."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  if not ptx:
    plgpu.commit_smem()
    return
  from jax.experimental.mosaic.gpu import utils as mgpu_utils

  @plgpu.inline_mgpu()
  def emit(ctx):
    mgpu_utils.warpgroup_barrier()
  emit()


def store(ref, value):
  """``ref[...] = value`` for a shared-memory ref without tiling or swizzle, element by element
  (an unoptimized store, as jax 0.10 and 0.11 make it; jax 0.12 asks for a bank-conflict-free
  pattern unless told, and finds none for these)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  if hasattr(plgpu, "store"):  # jax >= 0.12
    plgpu.store(ref, value, optimized=False)
  else:
    ref[...] = value


def matmul_nt(a, b, bias=None, *, relu: bool = False, tiles: Tiles = Tiles(),
              num_sms: int | None = None, interpret: bool = False):
  """``relu?(a @ b.T + bias)`` in float32 from a (M, K) and b (N, K), both float32 (TF32
  products) or both bfloat16, and bias (N,) float32 or None; (splits, M, N) partial sums over
  runs of K when ``tiles.splits > 1``. a and b may each be given as a ``split_tf32`` pair (hi,
  lo), both or neither: then the products are 3xTF32, float32's accuracy."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  x3 = isinstance(a, tuple)
  if x3 != isinstance(b, tuple):
    raise ValueError("give both a and b as (hi, lo) pairs, or neither")
  ins = (*a, *b) if x3 else (a, b)
  a, b = ins[0], ins[len(ins) // 2]
  m, n = a.shape[0], b.shape[0]
  if a.dtype != b.dtype:
    raise ValueError(f"matmul_nt takes a and b of one dtype, not {a.dtype} and {b.dtype}")
  if (why := check_shapes(a.shape, b.shape, a.dtype, tiles)) is not None:
    raise ValueError(why)
  if (relu or bias is not None) and tiles.splits > 1:
    raise ValueError("bias and ReLU apply to a whole product, not to partial sums")
  if num_sms is None:
    num_sms = jax.devices()[0].core_count
  work = tiles.splits * pl.cdiv(m, tiles.tile_m) * pl.cdiv(n, 2 * tiles.tile_n)
  out = jax.ShapeDtypeStruct((tiles.splits, m, n), jnp.float32)
  c = plgpu.kernel(
      functools.partial(_kernel, tiles=tiles, relu=relu, x3=x3, has_bias=bias is not None),
      out_type=out,
      grid=(min(num_sms, work),), grid_names=("sm",), num_threads=3, thread_name="wg",
      interpret=interpret,
      compiler_params=plgpu.CompilerParams(
          lowering_semantics=plgpu.LoweringSemantics.Warpgroup))(
              *ins, *(() if bias is None else (bias.astype(jnp.float32),)))
  return c if tiles.splits > 1 else c[0]


def on_hopper() -> bool:
  """Whether the default device is a Hopper GPU (sm_90) and this jax ships Pallas' Mosaic GPU
  (its module is there; whether it imports is not tried). Looked up, not imported: the import
  takes 0.34 s (H100 host, jax 0.11.2), which a run whose cached program holds no Mosaic GPU
  kernel never needs (``jaxshallow.compile_cache`` imports it for one that does)."""
  if importlib.util.find_spec("jax.experimental.pallas.mosaic_gpu") is None:
    return False
  device = jax.devices()[0]
  return device.platform == "gpu" and getattr(device, "compute_capability", "") == "9.0"


# The dense layer on top: y = relu?(x @ W + b) and its dW, db -----------------------------------

# The fastest tiles of a sweep at the MLP's 784 -> 256 layer, batch 8192, tf32
# (docs/design/op_kernels.md).
FWD_TILES = Tiles(tile_m=64, tile_n=128, tile_k=32, stages=4)
DW_TILES = Tiles(tile_m=64, tile_n=128, tile_k=32, stages=4, splits=8)
# float32 as 3xTF32: twice the operands a stage, so fewer stages fit in shared memory.
X3_FWD_TILES = Tiles(tile_m=64, tile_n=128, tile_k=32, stages=2)
X3_DW_TILES = Tiles(tile_m=64, tile_n=128, tile_k=32, stages=2, splits=8)


def dense_forward(x, w, b=None, *, relu=False, x3=False, interpret=False):
  """``relu?(x @ w + b)`` for x (M, K) and w (K, N) float32, with TF32 products, or 3xTF32
  (float32's accuracy) if ``x3``; also returns x^T as ``dense_grads`` takes it (split if x3).
  ``interpret``: the CPU runs ``reference`` in the kernel's place (Mosaic GPU has no
  interpreter for this kernel), so the tests check everything around it."""
  product = reference if interpret else matmul_nt
  if x3:
    y = product(split_tf32(x), split_tf32(w.T), b, relu=relu, tiles=X3_FWD_TILES)
    return y, split_tf32(x.T)
  return product(x, w.T, b, relu=relu, tiles=FWD_TILES), x.T


def dense_grads(xt, dy, y, *, has_bias: bool, interpret=False):
  """dW (K, N) and db (N,) or None from x^T (K, M) (a split pair: 3xTF32), the output's
  gradient dy (M, N) and, for a ReLU layer, its output y: dW = x^T g with g = dy [y > 0],
  db = g's column sums, both in a fixed order (dW's partial sums in split order, db in runs
  of 64 rows, then those sums)."""
  g = dy if y is None else jnp.where(y > 0, dy, 0.0)
  product = reference if interpret else matmul_nt
  if isinstance(xt, tuple):
    parts = product(xt, split_tf32(g.T), tiles=X3_DW_TILES)
  else:
    parts = product(xt, g.T, tiles=DW_TILES)
  return common.sum_parts(parts), (common.sum_many_parts(g, group=64) if has_bias else None)


def fits(m: int, k: int, n: int) -> bool:
  """Whether a float32 dense layer of these sizes fits both of its products: the forward's
  (x (M, K), W^T (N, K)) and dW's (x^T (K, M), g^T (N, M)), in either precision."""
  fwd = [check_shapes((m, k), (n, k), jnp.float32, t) for t in (FWD_TILES, X3_FWD_TILES)]
  dw = [check_shapes((k, m), (n, m), jnp.float32, t) for t in (DW_TILES, X3_DW_TILES)]
  return all(why is None for why in fwd + dw)
