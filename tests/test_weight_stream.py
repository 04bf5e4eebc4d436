"""probes.weight_stream's kernel lowers for a Hopper GPU in each of its forms (Mosaic GPU checks
layouts and shared memory at lowering); its times come from the device."""

import jax
import pytest

from probes import weight_stream


@pytest.mark.parametrize("products,x,work", [(True, "held", "all"), (True, "own", "tensor"),
                                             (True, "shared", "threads"), (False, "own", "all")])
def test_kernel_lowers(products, x, work):
  fn, xb = weight_stream.stream(2, 192, 128, 3, products, x, work)  # three tiles: odd, in flight
  text = fn.trace(xb).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text
