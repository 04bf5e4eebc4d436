"""The first convolution of a training step, reading its batch straight from the data set.

A step on data resident on the device starts by gathering its batch, ``images[order[rows]]``
and ``labels[order[rows]]``, and converting the uint8 pixels to float: two XLA launches a step
(docs/design/cnn.md). Here conv + bias + ReLU (``conv.fwd_tile``) reads the images where they
lie: program (b, i) looks up batch row b's example, ``order[step * B + b]``, and reads its pixels
as floats in [0, 1] as it loads them. The rest of the step needs the batch too (dw of this
convolution, the loss), so the same launch also writes it out: each program a share of its
image's pixels, the first one of each image its label (as int32).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common
from pallas_kernels.ops import conv


def reference(images, labels, order, step, batch, w, b):
  """The plain-jnp twin: (ReLU(conv(x) + b), x, y) for x, y the step's batch as floats in
  [0, 1] and int32."""
  rows = order[step * batch:(step + 1) * batch]
  x = conv.pixels(images[rows])
  return conv.reference(x, w, b), x, labels[rows].astype(jnp.int32)


def batch_conv_kernel(images_ref, labels_ref, order_ref, step_ref, offset_ref, w_ref, b_ref,
                      y_ref, x_ref, lab_ref, *, h, w, cin, block_p, per_program, stride, **kw):
  b, i = pl.program_id(0), pl.program_id(1)
  example = order_ref[(step_ref[...] * stride + offset_ref[...]) * pl.num_programs(0) + b]
  acc, ok = conv.fwd_tile(images_ref, w_ref, b_ref, example, h=h, w=w, cin=cin,
                          block_p=block_p, **kw)
  common.store_tile(y_ref, b * (h - 2) * (w - 2) + i * block_p, 0, acc, row_ok=ok)
  # This program's share of the image's pixels, for the kernels after it.
  p = i * per_program + jnp.arange(pl.next_power_of_2(per_program))
  px_ok = (p < (i + 1) * per_program) & (p < h * w)
  ch = jnp.arange(common.tile_side(cin))
  mask = px_ok[:, None] & (ch < cin)[None, :]
  tile = plgpu.load(images_ref.at[(example * h * w + p)[:, None], ch[None, :]], mask=mask,
                    other=0)
  common.store_tile(x_ref, b * h * w + i * per_program, 0, conv.pixels(tile), row_ok=px_ok)

  @pl.when(i == 0)
  def _():
    at = jnp.full((1,), example, jnp.int32)
    label = plgpu.load(labels_ref.at[at]).astype(jnp.int32)
    plgpu.store(lab_ref.at[jnp.full((1,), b, jnp.int32)], label)


def batch_conv(images, labels, order, step, w, b, *, batch, precision="float32", block_p=64,
               num_warps=4, wide=False, stride=1, offset=0, interpret=False):
  """ReLU(conv(x, w) + b) on step s's batch of ``batch`` examples, x = the images (N, H, W, C;
  uint8 pixels or floats) at ``order[s * batch:][:batch]``, s = ``step * stride + offset``
  (stride static, offset an operand: see ``sgd_parts``); returns (that, x as floats, the
  batch's labels as int32)."""
  n, h, wd, cin = images.shape
  cout = w.shape[-1]
  grid = (batch, pl.cdiv((h - 2) * (wd - 2), block_p))
  kernel = functools.partial(batch_conv_kernel, h=h, w=wd, cin=cin, cout=cout, block_p=block_p,
                             per_program=pl.cdiv(h * wd, grid[1]), precision=precision,
                             wide=wide, stride=stride)
  dtype = w.dtype
  y, x, y_labels = pl.pallas_call(
      kernel, out_shape=[jax.ShapeDtypeStruct((batch * (h - 2) * (wd - 2), cout), dtype),
                         jax.ShapeDtypeStruct((batch * h * wd, cin), dtype),
                         jax.ShapeDtypeStruct((batch,), jnp.int32)],
      grid=grid, compiler_params=common.compiler_params(num_warps, 1), interpret=interpret,
      name="batch_conv")(images.reshape(-1, cin), labels, order, jnp.asarray(step, jnp.int32),
                         jnp.asarray(offset, jnp.int32), w.reshape(9 * cin, cout), b)
  return y.reshape(batch, h - 2, wd - 2, cout), x.reshape(batch, h, wd, cin), y_labels
