"""dense_mgpu on the CPU: its kernel lowers for a Hopper GPU (the Mosaic GPU compiler's
checks of layouts, shared memory use and tiling run at lowering), its jnp twin adds up to the
float64 product, and shapes it cannot take are refused in one line. Its numbers on the GPU are
checked by ``experiments.check_kernels --only=hopper`` on the device."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.ops import dense_mgpu


def lower_for_cuda(fn, *shapes):
  args = [jax.ShapeDtypeStruct(s, d) for s, d in shapes]
  return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_forward_kernel_lowers(dtype):
  """The MLP's 784 -> 256 layer at batch 8192 (K padded to 832), bias and ReLU fused."""
  tiles = dense_mgpu.FWD_TILES
  fn = lambda a, b, bias: dense_mgpu.matmul_nt(a, b, bias, relu=True, tiles=tiles, num_sms=132)
  text = lower_for_cuda(fn, ((8192, 832), dtype), ((256, 832), dtype), ((256,), jnp.float32))
  assert "mosaic_gpu" in text


def test_dw_kernel_lowers():
  """dW = x^T g at batch 8192 in partial sums: (splits, 832, 256)."""
  tiles = dense_mgpu.DW_TILES
  fn = lambda a, b: dense_mgpu.matmul_nt(a, b, tiles=tiles, num_sms=132)
  out = jax.eval_shape(fn, jax.ShapeDtypeStruct((832, 8192), jnp.float32),
                       jax.ShapeDtypeStruct((256, 8192), jnp.float32))
  assert out.shape == (tiles.splits, 832, 256)
  assert "mosaic_gpu" in lower_for_cuda(fn, ((832, 8192), jnp.float32), ((256, 8192), jnp.float32))


def test_odd_shapes_lower():
  """Edges past M, N and K (TMA's zero fill and clipped stores), dW's last run short."""
  tiles = dense_mgpu.Tiles(tile_m=64, tile_n=128, tile_k=32, splits=3)
  fn = lambda a, b: dense_mgpu.matmul_nt(a, b, tiles=tiles, num_sms=132)
  assert "mosaic_gpu" in lower_for_cuda(fn, ((104, 1000), jnp.float32), ((296, 1000), jnp.float32))


def test_reference_partial_sums_add_up():
  """Uneven runs of K, as the kernel cuts them: 100 = 32 + 32 + 32 + 4 in 3 runs of 64."""
  rng = np.random.default_rng()
  a, b = rng.standard_normal((64, 100), np.float32), rng.standard_normal((256, 100), np.float32)
  parts = dense_mgpu.reference(a, b, tiles=dense_mgpu.Tiles(tile_k=32, splits=3))
  assert parts.shape == (3, 64, 256)
  assert np.all(np.asarray(parts[2]) == 0)  # 4 * 32 = 128 covers K = 100 in two runs of 64
  want = a.astype(np.float64) @ b.T.astype(np.float64)
  np.testing.assert_allclose(np.asarray(parts, np.float64).sum(0), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("a,b,message", [
    ((32, 64), (256, 64), "(M, N, K) = (32, 256, 64) is smaller than a tile (64, 256, 32)"),
    ((64, 64), (200, 64), "(M, N, K) = (64, 200, 64) is smaller than a tile"),
    ((64, 64), (256, 60), "a (M, K) and b (N, K) must share K"),
    ((64, 68), (256, 68), "K = 68 of float32: must be a multiple of 8"),
    ((68, 64), (256, 64), "M = 68 and N = 256 must be multiples of 8"),
])
def test_shapes_that_do_not_fit_are_refused(a, b, message):
  tiles = dense_mgpu.Tiles(tile_m=64, tile_n=128, tile_k=32)
  with pytest.raises(ValueError, match=re.escape(message)):
    dense_mgpu.matmul_nt(jnp.zeros(a), jnp.zeros(b), tiles=tiles, num_sms=132)


def test_3xtf32_kernel_lowers():
  """float32 as 3xTF32: a and b as (hi, lo) pairs, four operand streams."""
  tiles = dense_mgpu.X3_DW_TILES
  fn = lambda a, al, b, bl: dense_mgpu.matmul_nt((a, al), (b, bl), tiles=tiles, num_sms=132)
  shapes = [((784, 8192), jnp.float32)] * 2 + [((256, 8192), jnp.float32)] * 2
  assert "mosaic_gpu" in lower_for_cuda(fn, *shapes)


def test_split_tf32_is_exact():
  """3xTF32 (here and in pallas_kernels.fused.cluster_epoch_mgpu) rests on x = hi + lo exactly, with
  hi's low 13 mantissa bits clear."""
  x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * 1e3
  x[:4] = [0.0, -0.0, 1.0, np.float32(1) + np.float32(2.0 ** -23)]
  hi, lo = (np.asarray(v) for v in dense_mgpu.split_tf32(jnp.asarray(x)))
  assert np.all(hi.view(np.int32) & 0x1FFF == 0)
  assert np.array_equal(hi + lo, x)
  assert np.array_equal(hi.astype(np.float64) + lo.astype(np.float64), x.astype(np.float64))
  assert np.all(np.abs(lo) <= np.abs(x) * 2.0 ** -10)
