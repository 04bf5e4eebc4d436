"""probes.l2_fetch's kernel lowers for Hopper (it runs on a GPU only: the grid barrier's global
semaphore does not start in Mosaic GPU's interpreter)."""

import pytest

from probes import l2_fetch


@pytest.mark.parametrize("tiles", [0, 6, 12])
def test_fetch_kernel_lowers(tiles):
  fn = l2_fetch.kernel(8, tiles, 3)
  text = fn.trace(l2_fetch.source()).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text
