"""pallas_kernels.common's helpers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from pallas_kernels import common

@pytest.mark.parametrize("n", [1, 20, 33, 704])
def test_sum_many_parts_adds_every_part(n):
  """Runs of 16, then their sums: every part counted once, the padding none."""
  from pallas_kernels import common
  parts = np.random.default_rng(n).standard_normal((n, 3, 5)).astype(np.float32)
  got = jax.jit(common.sum_many_parts)(parts)
  np.testing.assert_allclose(got, parts.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_dot_split_is_as_accurate_as_float32(trans_a, trans_b):
  """common.dot_split (six products of bfloat16 parts) in a kernel, interpreted: within
  float32's rounding of the float64 product (bfloat16 operands alone: 1e-3), for every
  transposition the epoch kernel takes."""
  rng = np.random.default_rng(0)
  a = rng.standard_normal((32, 48) if trans_a else (48, 32)).astype(np.float32)
  b = rng.standard_normal((16, 32) if trans_b else (32, 16)).astype(np.float32)

  def product(precision):
    def kernel(a_ref, b_ref, o_ref):
      o_ref[...] = common.dot(a_ref[...], b_ref[...], precision, trans_a, trans_b)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((48, 16), jnp.float32),
                          interpret=True)(a, b)
  a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
  b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
  want = a64 @ b64
  scale = np.abs(a64) @ np.abs(b64)
  assert np.max(np.abs(np.asarray(product("split")) - want) / scale) < 2e-7
  assert np.max(np.abs(np.asarray(product("bfloat16")) - want) / scale) > 1e-4


def test_dot_split_of_integer_pixels_is_exact_in_each_product():
  """a_exact: integer pixels (bfloat16 values) times W's three parts, three products, as close
  to the float64 product as the six of two split operands."""
  rng = np.random.default_rng(1)
  a = rng.integers(0, 256, (64, 48)).astype(np.float32)
  b = rng.standard_normal((48, 32)).astype(np.float32)

  def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = common.dot_split(a_ref[...], b_ref[...], a_exact=True)
  got = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((64, 32), jnp.float32),
                       interpret=True)(a, b)
  want = a.astype(np.float64) @ b.astype(np.float64)
  scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
  assert np.max(np.abs(np.asarray(got) - want) / scale) < 2e-7
