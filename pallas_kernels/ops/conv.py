"""Fused 3x3 valid convolution + bias + ReLU (NHWC images, HWIO weights).

An implicit GEMM: the nine taps' shifted input windows are gathered straight into registers as
the columns of tiles, never materialised as im2col in memory. Column layout (``_groups``), with
c channels padded to c_p (a power of two, at least 16):
  by default    a tile per tap (c_p columns), its offsets splats so that Triton loads a row's
                channels as vectors (but in FMA dx, see there). Triton's float32 product
                runs on the FMA units and holds a thread's share of the whole inner dimension in
                registers: at 128 columns it spilled, and conv2's forward slowed many times
                over.
  wide          (an override) taps 0-7 as one tile of 8 * c_p columns, tap 8 as another. Meant
                for the tensor cores' long inner dimension, but their loads are scalar: tf32
                conv2's dx measured slower than with a tile per tap, even at its best blocks.
  one channel   (grey images, any precision) all nine taps as the columns of one 16-wide tile:
                one product instead of nine that were 15/16 padding.
Padding is masked, so any channel count works.

  forward  a program owns ``block_p`` output pixels of one image and all output channels:
           y = relu(sum over tiles of x_cols @ w_rows + b), one store
  dx       a program owns ``block_p`` input pixels: the gradient g = dy * [y > 0] (one XLA
           elementwise op before it, dropped where x needs no gradient) of the output pixels
           each tap maps them to, as columns, times the matching weights transposed (float32:
           3xTF32 on the GPU, see FLOAT32_DX)
  dw       a program owns a run of ``dw_taps`` column tiles (three taps: a row of the 3x3
           window) and a share (a split) of all output pixels; per block of them it loads dy
           and y (contiguous rows) once, takes g = dy * [y > 0], and adds x_cols^T @ g to its
           partial tile of each tap; the partials (and db) are added up after it, in a
           fixed order (``common.sum_parts``). (``conv_pool`` hands it g itself.)

Inside, tensors are 2-D: images (B*H*W, C), weights (9*cin, cout) with row (3*di + dj)*cin + ci.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common

# Pixels per program, warps and (dw) splits of all output pixels and pipeline stages of its loop,
# per kernel, for float32 (FMA units; dx 3xTF32, see FLOAT32_DX) and the tensor-core precisions.
# The fastest of sweeps at the CNN's conv2, alone and in the CNN's step
# (docs/design/op_kernels.md). dw's loop only reads what the launch never writes, so Triton may
# load its next blocks ahead: float32 gained from more stages (the same bits), tf32 and conv1 did
# not (one stage). dw's programs take three taps each (a row of the window), g loaded once for
# the three, which beat one tap and nine (the same bits). In the CNN's step (``fusion="step"``,
# conv2's dw beside the dx programs in one launch, conv_stack) float32 ran best at 256 splits,
# tf32 at 128; conv1's forward (the only user of fwd_p there) at 64 pixels a program.
# ``blocks`` overrides: block_p, num_warps (all three kernels), splits, wide, dw_taps.
DEFAULT_BLOCKS = {
    "float32": dict(fwd_p=64, fwd_warps=4, dx_p=64, dx_warps=4, dw_p=32, dw_warps=4,
                    dw_stages=3, dw_taps=3, splits=256),
    "tensor": dict(fwd_p=64, fwd_warps=4, dx_p=64, dx_warps=4, dw_p=64, dw_warps=4,
                   dw_stages=1, dw_taps=3, splits=128),
}
# dw of a one-channel input (the CNN's conv1: one 16-column tile of the nine taps) wants longer
# blocks, in float32 and tf32 alike (batch 64, 28x28 -> 16).
ONE_CHANNEL_DW = dict(dw_p=128, dw_warps=4, dw_stages=1, splits=128)


# float32 dx takes its products as 3xTF32 ("float32x3", tensor cores) on the GPU: as accurate
# as the FMA units' float32 (against float64, conv2's dx came out closer) and faster where the
# FMA product runs slowest. The forward and dw stay on the FMA units, where 3xTF32 was slower at
# every block size tried (docs/design/op_kernels.md).
FLOAT32_DX = "float32x3"


def dx_precision(precision, interpret):
  """The precision of dx's products: float32 as FLOAT32_DX, but in interpret mode (XLA's CPU
  dot has no 3xTF32)."""
  return FLOAT32_DX if precision == "float32" and not interpret else precision


def units(precision):
  """The DEFAULT_BLOCKS key: the units that run ``precision``'s products."""
  return "float32" if precision == "float32" else "tensor"


def config(precision, blocks=None, cin=None) -> dict:
  """The block sizes for ``precision`` and ``cin`` input channels, with ``blocks`` (name, value)
  overrides."""
  over = dict(blocks or ())
  cfg = dict(DEFAULT_BLOCKS[units(precision)], wide=over.pop("wide", False))
  if cin == 1:
    cfg.update(ONE_CHANNEL_DW)
  for kernel in ("fwd", "dx", "dw"):
    if "block_p" in over:
      cfg[f"{kernel}_p"] = over["block_p"]
    if "num_warps" in over:
      cfg[f"{kernel}_warps"] = over["num_warps"]
  for key in ("splits", "dw_taps"):
    if key in over:
      cfg[key] = over[key]
  return cfg


def reference(x, w, b):
  """The plain-jnp twin, with exact float32 products."""
  y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", precision=jax.lax.Precision.HIGHEST,
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return jax.nn.relu(y + b)


def _groups(c, wide):
  """The taps' column tiles for c channels: (first tap, taps, columns per tap, tile width);
  ``wide``: taps 0-7 in one tile (see the module's docstring)."""
  if c == 1:
    return [(0, 9, 1, 16)]
  c_p = common.tile_side(c)
  if wide:
    return [(0, 8, c_p, 8 * c_p), (8, 1, c_p, c_p)]
  return [(t, 1, c_p, c_p) for t in range(9)]


def _width(groups):
  """The columns (rows of dw) of the groups' tiles together."""
  return sum(group[3] for group in groups)


def _columns(group, c, vector=True):
  """Per column of a group's tile: its tap's row and column offsets (di, dj), its channel, and
  whether it is a real (tap, channel) column rather than padding."""
  t0, taps, per_tap, width = group
  j = jnp.arange(width)
  if taps == 1 and vector:
    # Offsets as splats: Triton then sees that a row's columns are contiguous and loads them
    # four floats at a time; derived from j // per_tap it did not (scalar loads). That made tf32
    # dx and float32 dw faster in the CNN step, but dx on the FMA units much slower (see
    # dx_tile).
    splat = lambda v: jnp.full((width,), v, jnp.int32)
    return splat(t0 // 3), splat(t0 % 3), j, j < c
  t, ch = t0 + j // per_tap, j % per_tap
  return t // 3, t % 3, ch, (j < taps * per_tap) & (ch < c)


def pixels(v):
  """uint8 pixels as float32 in [0, 1], as ``train.to_float`` makes them (bit for bit: a product
  by float32 1/255, one IEEE rounding; Triton's float division is not IEEE's); other values as
  they are."""
  return v.astype(jnp.float32) * (1.0 / 255.0) if v.dtype == jnp.uint8 else v


def _tap_tile(ref, rows, ok, ch, width_ok):
  """``ref[rows, ch]`` for a (P, width) grid of rows and channels, zeros where not ok (uint8
  pixels read as ``pixels``)."""
  mask = ok & width_ok[None, :]
  rows = jnp.where(mask, rows, 0)
  return pixels(plgpu.load(ref.at[rows, jnp.broadcast_to(ch[None, :], rows.shape)], mask=mask,
                           other=0))


def _weight_rows(w_ref, group, cin, cout):
  """The (width, cout_p) weights matching a group's columns: row (tap, ci) = w[tap * cin + ci]."""
  di, dj, ch, ok = _columns(group, cin)
  co = jnp.arange(common.tile_side(cout))
  rows = jnp.where(ok, (3 * di + dj) * cin + ch, 0)
  return plgpu.load(w_ref.at[rows[:, None], co[None, :]], mask=ok[:, None] & (co < cout)[None, :],
                    other=0.0)


def _weight_rows_t(w_ref, group, cin, cout, vector):
  """For dx, with columns over the cout channels of the taps: (width, cin_p), row (tap, co) =
  w[tap * cin + ci, co] over ci."""
  di, dj, co, ok = _columns(group, cout, vector)
  ci = jnp.arange(common.tile_side(cin))
  mask = ok[:, None] & (ci < cin)[None, :]
  rows = jnp.where(mask, (3 * di + dj)[:, None] * cin + ci[None, :], 0)
  return plgpu.load(w_ref.at[rows, jnp.broadcast_to(co[:, None], rows.shape)], mask=mask,
                    other=0.0)


def _corner(b, p, h, w):
  """The input row under tap (0, 0) of output pixel p of image b (images h x w)."""
  return b * h * w + (p // (w - 2)) * w + p % (w - 2)


def _input_cols(x_ref, corner, ok, group, w, cin):
  """The group's column tile of the input windows of output pixels whose tap (0, 0) reads input
  row ``corner``."""
  di, dj, ch, col_ok = _columns(group, cin)
  rows = corner[:, None] + (di * w + dj)[None, :]
  return _tap_tile(x_ref, rows, ok[:, None], ch, col_ok)


# Kernels -------------------------------------------------------------------------------------

def fwd_tile(x_ref, w_ref, b_ref, image, *, h, w, cin, cout, block_p, precision, wide):
  """ReLU(conv + b) at this program's ``block_p`` output pixels of the image that starts at row
  ``image`` * h * w of x: the (block_p, cout_p) tile and which of its rows are pixels."""
  p = pl.program_id(1) * block_p + jnp.arange(block_p)
  ok = p < (h - 2) * (w - 2)
  corner = _corner(image, p, h, w)
  acc = jnp.zeros((block_p, common.tile_side(cout)), common.acc_dtype(w_ref.dtype))
  for group in _groups(cin, wide):
    acc += common.dot(_input_cols(x_ref, corner, ok, group, w, cin),
                      _weight_rows(w_ref, group, cin, cout), precision)
  co = jnp.arange(common.tile_side(cout))
  return jnp.maximum(acc + plgpu.load(b_ref.at[co], mask=co < cout, other=0.0)[None, :], 0.0), ok


def conv_fwd_kernel(x_ref, w_ref, b_ref, y_ref, *, h, w, block_p, **kw):
  b = pl.program_id(0)
  acc, ok = fwd_tile(x_ref, w_ref, b_ref, b, h=h, w=w, block_p=block_p, **kw)
  common.store_tile(y_ref, b * (h - 2) * (w - 2) + pl.program_id(1) * block_p, 0, acc,
                    row_ok=ok)


def dx_tile(g_ref, w_ref, b, p, ok, *, h, w, cin, cout, precision, wide):
  """dx at input pixels p of image b (images h x w): a (len(p), cin_p) tile, zeros where not
  ok. Shared with ``conv_stack``, whose kernel goes on from it to the layer below's dw."""
  oh_n, ow_n = h - 2, w - 2
  ih, iw = p // w, p % w
  acc = jnp.zeros((p.shape[0], common.tile_side(cin)), common.acc_dtype(g_ref.dtype))
  # Vector loads of g made the FMA units' product slower here (conv2, at every block size tried)
  # and the tensor-core products faster. On the GPU float32 dx runs on the tensor cores
  # (FLOAT32_DX); the FMA form is what interpret mode runs.
  vector = units(precision) == "tensor"
  for group in _groups(cout, wide):
    di, dj, co, col_ok = _columns(group, cout, vector)
    oh, ow = ih[:, None] - di[None, :], iw[:, None] - dj[None, :]  # The output pixel of a tap.
    tap_ok = ok[:, None] & (oh >= 0) & (oh < oh_n) & (ow >= 0) & (ow < ow_n)
    g = _tap_tile(g_ref, b * oh_n * ow_n + oh * ow_n + ow, tap_ok, co, col_ok)
    acc += common.dot(g, _weight_rows_t(w_ref, group, cin, cout, vector), precision)
  return acc


def conv_dx_kernel(g_ref, w_ref, dx_ref, *, h, w, cin, cout, block_p, precision, wide):
  b, p = pl.program_id(0), pl.program_id(1) * block_p + jnp.arange(block_p)
  ok = p < h * w
  acc = dx_tile(g_ref, w_ref, b, p, ok, h=h, w=w, cin=cin, cout=cout, precision=precision,
                wide=wide)
  common.store_tile(dx_ref, b * h * w + pl.program_id(1) * block_p, 0, acc, row_ok=ok)


def _runs(groups, taps):
  """The groups in runs of ``taps`` (the last one shorter): dw's programs, by program id."""
  return [groups[i:i + taps] for i in range(0, len(groups), taps)]


def conv_dw_kernel(x_ref, g_ref, *refs, relu, **kw):
  # relu: g_ref holds dy, and the next ref y, the forward's output: g = dy * [y > 0] here.
  y_ref, dw_ref, db_ref = refs if relu else (None, *refs)
  dw_program(x_ref, g_ref, y_ref, dw_ref, db_ref, pl.program_id(0), pl.program_id(1), **kw)


def dw_program(x_ref, g_ref, y_ref, dw_ref, db_ref, gi, s, *, h, w, cin, cout, block_p,
               chunks_per_split, precision, wide, taps):
  """Program (gi, s) of dw: run gi of the column tiles, split s of the output pixels (y_ref:
  the forward's output, for ReLU's gradient, or None). Shared with ``conv_stack``, whose
  backward kernel runs these programs beside its own."""
  relu = y_ref is not None
  oh_n, ow_n = h - 2, w - 2
  n_out = g_ref.shape[0]
  groups = _groups(cin, wide)
  rows_per_split = _width(groups)

  def run(run_groups, row0):
    with_db = row0 == 0  # Every run sees the same g; the first one's programs sum db.

    def body(c, carry):
      accs, db = carry
      q0 = (s * chunks_per_split + c) * block_p
      q = q0 + jnp.arange(block_p)  # Global output pixel.
      ok = q < n_out
      g = common.load_tile(g_ref, q0, 0, block_p, common.tile_side(cout))  # Zeros past the ends.
      if relu:
        g = jnp.where(common.load_tile(y_ref, q0, 0, block_p, common.tile_side(cout)) > 0, g, 0.0)
      corner = _corner(q // (oh_n * ow_n), q % (oh_n * ow_n), h, w)
      accs = tuple(acc + common.dot(_input_cols(x_ref, corner, ok, group, w, cin), g, precision,
                                    trans_a=True) for acc, group in zip(accs, run_groups))
      return accs, db + jnp.sum(g, axis=0) if with_db else db

    dtype = common.acc_dtype(x_ref.dtype)
    accs, db = jax.lax.fori_loop(
        0, chunks_per_split, body,
        (tuple(jnp.zeros((group[3], common.tile_side(cout)), dtype) for group in run_groups),
         jnp.zeros((common.tile_side(cout),), dtype)))
    # This split's partial: rows s * rows_per_split + (tap, ci), as the groups lay them out.
    for acc, group in zip(accs, run_groups):
      common.store_tile(dw_ref, s * rows_per_split + row0, 0, acc)
      row0 += group[3]
    if with_db:
      common.store_tile(db_ref, s, 0, db[None, :])

  row0 = 0
  for i, run_groups in enumerate(_runs(groups, taps)):  # Static tile widths per program.
    pl.when(gi == i)(functools.partial(run, run_groups, row0))
    row0 += _width(run_groups)


# pallas_call wrappers (4-D NHWC in and out) ---------------------------------------------------

def _dims(x, w):
  (n, h, wd, cin), cout = x.shape, w.shape[-1]
  return n, h, wd, cin, cout


def conv_fwd(x, w, b, *, precision="float32", block_p=64, num_warps=4, wide=False,
             interpret=False):
  n, h, wd, cin, cout = _dims(x, w)
  kernel = functools.partial(conv_fwd_kernel, h=h, w=wd, cin=cin, cout=cout, block_p=block_p,
                             precision=precision, wide=wide)
  y = pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((n * (h - 2) * (wd - 2), cout), x.dtype),
      grid=(n, pl.cdiv((h - 2) * (wd - 2), block_p)),
      compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="conv_fwd")(x.reshape(-1, cin), w.reshape(9 * cin, cout), b)
  return y.reshape(n, h - 2, wd - 2, cout)


def conv_dx(g, w, x_shape, *, precision="float32", block_p=64, num_warps=4, wide=False,
            interpret=False):
  n, h, wd, cin = x_shape
  cout = w.shape[-1]
  kernel = functools.partial(conv_dx_kernel, h=h, w=wd, cin=cin, cout=cout, block_p=block_p,
                             precision=dx_precision(precision, interpret), wide=wide)
  dx = pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((n * h * wd, cin), g.dtype),
      grid=(n, pl.cdiv(h * wd, block_p)),
      compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="conv_dx")(g.reshape(-1, cout), w.reshape(9 * cin, cout))
  return dx.reshape(x_shape)


def dw_launch(x_shape, cout, *, precision, block_p, splits, taps, wide, dtype):
  """dw's grid (runs of taps, splits), its program options (``dw_program``'s keywords) and its
  outputs' shapes (partial dw and db tiles, one per split) for input x_shape and cout outputs."""
  n, h, wd, cin = x_shape
  chunks = pl.cdiv(n * (h - 2) * (wd - 2), block_p)
  splits = max(1, min(splits, chunks))
  groups = _groups(cin, wide)
  kw = dict(h=h, w=wd, cin=cin, cout=cout, block_p=block_p, precision=precision, wide=wide,
            chunks_per_split=pl.cdiv(chunks, splits), taps=taps)
  out = [jax.ShapeDtypeStruct((splits * _width(groups), common.tile_side(cout)), dtype),
         jax.ShapeDtypeStruct((splits, common.tile_side(cout)), dtype)]
  return (len(_runs(groups, taps)), splits), kw, out


def conv_dw_parts(x, g, y=None, *, precision="float32", block_p=64, splits=128, num_warps=4,
                  num_stages=1, taps=3, wide=False, interpret=False):
  """dw's and db's partial tiles (laid out as ``dw_layout`` says), one per split, from the input
  x and the output gradient g; with ``y``, the forward's output, g is dy and the kernel applies
  ReLU's gradient, g = dy * [y > 0]. ``taps``: column tiles (taps) a program takes, each block
  of g loaded once for them."""
  cin, cout = x.shape[-1], g.shape[-1]
  grid, kw, out_shape = dw_launch(x.shape, cout, precision=precision, block_p=block_p,
                                  splits=splits, taps=taps, wide=wide, dtype=x.dtype)
  return pl.pallas_call(
      functools.partial(conv_dw_kernel, relu=y is not None, **kw), out_shape=out_shape,
      grid=grid, compiler_params=common.compiler_params(num_warps, num_stages),
      interpret=interpret, name="conv_dw")(
          x.reshape(-1, cin), g.reshape(-1, cout), *([] if y is None else [y.reshape(-1, cout)]))


def conv_dw(x, g, y=None, **kw):
  """dw (3, 3, cin, cout) and db: ``conv_dw_parts`` added up."""
  return sum_dw_parts(*conv_dw_parts(x, g, y, **kw), x.shape[-1], g.shape[-1])


def dw_layout(cin, cout):
  """A partial dw tile as ((9, cin, cout), its padded (rows, ., cout_p)): rows (tap, ci) as
  ``_groups`` lays them out, the one-channel input's nine taps in a 16-row tile."""
  if cin == 1:
    return (9, 1, cout), (16, 1, common.tile_side(cout))
  return (9, cin, cout), (9, common.tile_side(cin), common.tile_side(cout))


def db_layout(cout):
  """A partial db tile as ((cout,), (cout_p,))."""
  return (cout,), (common.tile_side(cout),)


def sum_dw_parts(dw_parts, db_parts, cin, cout, add=common.sum_parts):
  """dw (3, 3, cin, cout) and db from partial tiles (``dw_layout``), added up in a fixed order
  by ``add``."""
  parts = db_parts.shape[0]
  (d0, d1, d2), padded = dw_layout(cin, cout)
  dw_parts = dw_parts.reshape(parts, *padded)[:, :d0, :d1, :d2]
  return add(dw_parts.reshape(parts, 3, 3, cin, cout)), add(db_parts[:, :cout])


# The differentiable op -------------------------------------------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _conv_relu(x, w, b, precision="float32", blocks=None, interpret=False):
  cfg = config(precision, blocks)
  return conv_fwd(x, w, b, precision=precision, block_p=cfg["fwd_p"],
                  num_warps=cfg["fwd_warps"], wide=cfg["wide"], interpret=interpret)


def _conv_vjp_fwd(x, w, b, precision, blocks, interpret):
  y = _conv_relu(x, w, b, precision, blocks, interpret)
  return y, (x, w, y)


def _conv_vjp_bwd(precision, blocks, interpret, res, dy):
  x, w, y = res
  cfg = config(precision, blocks, cin=x.shape[-1])
  kw = dict(precision=precision, wide=cfg["wide"], interpret=interpret)
  dw, db = conv_dw(x, dy, y, block_p=cfg["dw_p"], num_warps=cfg["dw_warps"],
                   num_stages=cfg["dw_stages"], taps=cfg["dw_taps"], splits=cfg["splits"], **kw)
  # ReLU's gradient once for dx, whose kernel would redo it per tap. Where x needs no gradient
  # (the images), XLA drops this op and the kernel.
  g = jnp.where(y > 0, dy, 0.0)
  dx = conv_dx(g, w, x.shape, block_p=cfg["dx_p"], num_warps=cfg["dx_warps"], **kw)
  return dx, dw, db


_conv_relu.defvjp(_conv_vjp_fwd, _conv_vjp_bwd)


def conv_relu(x, w, b, *, precision="float32", blocks=None, interpret=False):
  """``ReLU(conv3x3_valid(x, w) + b)`` through Pallas kernels, forward and backward."""
  return _conv_relu(x, w, b, precision, blocks, interpret)
