"""pallas_kernels.fused.conv_batch, the CNN step's first convolution on the batch it looks up
itself, against float64 references (interpret mode on the CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import train
from pallas_kernels.fused import conv_batch

@pytest.mark.parametrize("n,side,cin,cout,batch,block_p", [(30, 10, 1, 16, 4, 16),
                                                           (20, 7, 3, 5, 3, 8)])
def test_batch_conv_reads_its_batch_float64(n, side, cin, cout, batch, block_p):
  """The step's first convolution on the batch it looks up itself, and the batch it writes out
  for the kernels after it: against the gathered batch's float64 convolution."""
  rng = np.random.default_rng()
  with jax.enable_x64(True):
    images = jnp.asarray(rng.random((n, side, side, cin)))
    labels = jnp.asarray(rng.integers(0, 10, n), jnp.uint8)
    order = jnp.asarray(rng.permutation(n).astype(np.int32))
    w, b = jnp.asarray(rng.normal(size=(3, 3, cin, cout))), jnp.asarray(rng.normal(size=cout))
    got = conv_batch.batch_conv(images, labels, order, 2, w, b, batch=batch, block_p=block_p,
                                interpret=True)
    ref = conv_batch.reference(images, labels, order, 2, batch, w, b)
  for a, r in zip(got, ref):
    assert a.shape == r.shape and a.dtype == r.dtype
    np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)


def test_batch_conv_reads_uint8_pixels_as_to_float():
  rng = np.random.default_rng()
  images = rng.integers(0, 256, (9, 6, 6, 1), dtype=np.uint8)
  order = rng.permutation(9).astype(np.int32)
  _, x, labels = conv_batch.batch_conv(images, np.arange(9, dtype=np.uint8), order, 1,
                                       jnp.ones((3, 3, 1, 2)), jnp.zeros(2), batch=4,
                                       interpret=True)
  # Bit for bit: both scale by a float32 product (train.to_float).
  np.testing.assert_array_equal(x, train.to_float(images[order[4:8]]))
  np.testing.assert_array_equal(labels, order[4:8])
