"""pallas_kernels.ops.dense against float64 references on fresh random inputs (interpret mode
on CPU).

Shapes cover M in {1, 37, 64, 1000}, K in {784, 100, 33}, N in {10, 256, 1000}: multiples of the
blocks and not. Unwritten outputs would show up as NaN (interpret mode fills outputs with NaN).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import ops
from kernel_checks import TOL, clear_of_relu_kink, reference_vjp, rel_err
from pallas_kernels.ops import dense as dense_lib

SHAPES = [(1, 784, 256), (37, 100, 10), (64, 784, 256), (64, 33, 1000), (1000, 100, 10),
          (37, 33, 256), (1000, 784, 10), (1, 33, 10)]
BLOCKS = [None, (("block_m", 16), ("block_n", 16), ("block_k", 16)),
          (("block_m", 32), ("block_n", 128), ("block_k", 64))]


@pytest.mark.parametrize("blocks", BLOCKS, ids=["default", "16x16x16", "32x128x64"])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("relu,bias", [(True, True), (False, True), (True, False)])
def test_dense_forward_and_grads(m, k, n, blocks, relu, bias):
  rng = np.random.default_rng()
  while True:  # Fresh inputs whose pre-activations have both signs, so the ReLU clips some.
    x = rng.standard_normal((m, k), np.float32)
    w = rng.standard_normal((k, n), np.float32) / np.sqrt(k)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    z64 = x.astype(np.float64) @ w + (0 if b is None else b)
    if not relu or (z64.min() < -1e-4 and z64.max() > 1e-4):
      break  # One row of 10 units (m = 1) has a single sign about once in 500 draws.
  dy = rng.standard_normal((m, n), np.float32)
  if relu:
    dy = clear_of_relu_kink(dy, z64)

  fn = lambda x, w, b: dense_lib.dense(x, w, b, relu=relu, blocks=blocks, interpret=True)
  y, vjp = jax.vjp(fn, x, w, b)
  dx, dw, db = vjp(jnp.asarray(dy))
  ref = lambda x, w, b: dense_lib.reference(x, w, b, relu=relu)
  y64, (dx64, dw64, db64) = reference_vjp(ref, [x, w, b], dy)

  assert rel_err(y, y64) < TOL
  assert rel_err(dx, dx64) < TOL
  assert rel_err(dw, dw64) < TOL
  if bias:
    assert rel_err(db, db64) < TOL
  else:
    assert db is None
  if relu:  # The ReLU really clipped something, so the mask was exercised.
    assert 0 < np.mean(np.asarray(y) == 0) < 1


@pytest.mark.parametrize("blocks", BLOCKS[:2], ids=["default", "16x16x16"])
@pytest.mark.parametrize("m,k,n", [(1, 784, 256), (37, 100, 10), (64, 784, 256), (37, 33, 1000),
                                   (300, 33, 40)])
def test_dense_pretransposed_w(m, k, n, blocks):
  """W stored as (N, K): the same values and gradients as the (K, N) layout's reference, dw in
  the stored layout."""
  rng = np.random.default_rng()
  x = rng.standard_normal((m, k), np.float32)
  w_t = rng.standard_normal((n, k), np.float32) / np.sqrt(k)
  b = rng.standard_normal(n).astype(np.float32)
  dy = clear_of_relu_kink(rng.standard_normal((m, n), np.float32),
                          x.astype(np.float64) @ w_t.T + b)

  fn = lambda x, w_t, b: dense_lib.dense(x, w_t, b, relu=True, blocks=blocks, interpret=True,
                                             w_transposed=True)
  y, vjp = jax.vjp(fn, x, w_t, b)
  dx, dw_t, db = vjp(jnp.asarray(dy))
  ref = lambda x, w_t, b: dense_lib.reference(x, w_t.T, b, relu=True)
  y64, (dx64, dw_t64, db64) = reference_vjp(ref, [x, w_t, b], dy)

  assert dw_t.shape == (n, k)
  for got, want in [(y, y64), (dx, dx64), (dw_t, dw_t64), (db, db64)]:
    assert rel_err(got, want) < TOL


@pytest.mark.parametrize("w_transposed", [False, True])
@pytest.mark.parametrize("m,k,n,splits", [(70, 37, 19, 3), (70, 37, 19, 8), (5, 40, 33, 4),
                                          (64, 20, 16, 1)])
def test_dense_dw_splits(m, k, n, splits, w_transposed):
  """dw and db as partial sums over runs of rows: rows that do not fill the last block, more
  splits than blocks of rows, tiles reaching past K and N (which must not spill into the next
  split's partials)."""
  rng = np.random.default_rng()
  x, dy, y = (rng.standard_normal(s, np.float32) for s in ((m, k), (m, n), (m, n)))
  g = dy.astype(np.float64) * (y > 0)
  want = x.T.astype(np.float64) @ g
  dw, db = dense_lib.dense_dw(x, dy, y, relu=True, w_transposed=w_transposed, block_m=16,
                              block_n=16, block_k=16, dw_splits=splits, interpret=True)
  assert rel_err(dw, want.T if w_transposed else want) < TOL
  assert rel_err(db, g.sum(0)) < TOL
  if not w_transposed:  # x handed over as (K, M): the same sums.
    dw, db = dense_lib.dense_dw(np.ascontiguousarray(x.T), dy, y, relu=True, x_transposed=True,
                                block_m=16, block_n=16, block_k=16, dw_splits=splits,
                                interpret=True)
    assert rel_err(dw, want) < TOL and rel_err(db, g.sum(0)) < TOL


def test_dense_blocks_by_shape():
  """Large batches take their own tiles per kernel, dw in splits (from x transposed where that
  paid); overrides set every kernel's tiles, unsplit."""
  small = dense_lib.kernel_blocks(64, 784, "float32", "dw", None)
  assert (small["block_m"], small["block_n"], small["block_k"]) == (16, 16, 128)
  assert "dw_splits" not in small and small["precision"] == "float32"
  large = dense_lib.kernel_blocks(8192, 784, "float32", "dw", None)
  assert large["x_transposed"] and large["dw_splits"] > 1
  assert "x_transposed" not in dense_lib.kernel_blocks(8192, 784, "float32", "dw", None, True)
  assert dense_lib.kernel_blocks(8192, 32, "tf32", "fwd", None)["block_k"] == 32
  tiles = (("block_m", 32), ("block_n", 32), ("block_k", 64))
  forced = dense_lib.kernel_blocks(8192, 784, "float32", "dw", tiles)
  assert forced == dict(block_m=32, block_n=32, block_k=64, num_warps=4, num_stages=2,
                        precision="float32")


def test_dense_large_batch_path(monkeypatch):
  """The large-batch kernels (dw in splits, from x transposed) through the custom_vjp, on a
  shape small enough for interpret mode: the threshold is lowered for the test."""
  monkeypatch.setattr(dense_lib, "_LARGE_ROWS", 64)
  rng = np.random.default_rng()
  x = rng.standard_normal((300, 70), np.float32)
  w = rng.standard_normal((70, 40), np.float32) / np.sqrt(70)
  b = rng.standard_normal(40).astype(np.float32)
  dy = clear_of_relu_kink(rng.standard_normal((300, 40), np.float32),
                          x.astype(np.float64) @ w + b)
  fn = lambda x, w, b: dense_lib.dense(x, w, b, relu=True, interpret=True)
  y, vjp = jax.vjp(fn, x, w, b)
  ref = lambda x, w, b: dense_lib.reference(x, w, b, relu=True)
  y64, want = reference_vjp(ref, [x, w, b], dy)
  assert rel_err(y, y64) < TOL
  for got, w64 in zip(vjp(jnp.asarray(dy)), want):
    assert rel_err(got, w64) < TOL


@pytest.mark.parametrize("precision", ["tf32", "float32"])
@pytest.mark.parametrize("relu,bias", [(True, True), (False, False)])
def test_dense_hopper_path(monkeypatch, relu, bias, precision):
  """The tf32 large-batch path of Hopper GPUs (dense_mgpu: W and g transposed for the
  kernel, dW's partial sums over uneven runs of the batch, db in runs) through the custom_vjp,
  with the kernel's jnp twin in its place (the CPU has no Mosaic GPU interpreter for it): odd
  shapes, the threshold lowered for the test."""
  monkeypatch.setattr(ops, "HOPPER_DENSE_FROM_ROWS", 64)
  m, k, n = 296, 104, 264  # multiples of 8 (TMA), of no tile
  assert ops.dense_on_hopper(m, k, n, precision, None, False, True)
  rng = np.random.default_rng()
  x = rng.standard_normal((m, k), np.float32)
  w = rng.standard_normal((k, n), np.float32) / np.sqrt(k)
  b = rng.standard_normal(n).astype(np.float32) if bias else None
  dy = rng.standard_normal((m, n), np.float32)
  if relu:
    dy = clear_of_relu_kink(dy, x.astype(np.float64) @ w + (0 if b is None else b))
  fn = lambda x, w, b: dense_lib.dense(x, w, b, relu=relu, precision=precision, interpret=True,
                                       hopper=True)
  y, vjp = jax.vjp(fn, x, w, b)
  ref = lambda x, w, b: dense_lib.reference(x, w, b, relu=relu)
  y64, want = reference_vjp(ref, [x, w, b], dy)
  assert rel_err(y, y64) < TOL
  for got, w64 in zip(vjp(jnp.asarray(dy)), want):
    if w64 is None:
      assert got is None
    else:
      assert rel_err(got, w64) < TOL


@pytest.mark.parametrize("precision,tol", [("tf32", 5e-3), ("bfloat16", 2e-2)])
def test_dense_reduced_precision(precision, tol):
  """Tolerances of the reduced modes (on CPU they compute more exactly than on a GPU)."""
  rng = np.random.default_rng()
  x, w = rng.standard_normal((64, 784), np.float32), rng.standard_normal((784, 256), np.float32)
  y = dense_lib.dense(x, w, None, precision=precision, interpret=True)
  assert rel_err(y, x.astype(np.float64) @ w) < tol
