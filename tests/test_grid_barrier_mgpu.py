"""The Mosaic GPU grid barrier (pallas_kernels.mgpu.grid_barrier): it lowers for Hopper on
every supported jax (the CPU lowers; only the GPU runs it: probes.cluster_exchange
--mgpu_grid_programs checks and times it there)."""

import re

import pytest

pytest.importorskip("jax.experimental.pallas.mosaic_gpu")


def test_exchange_lowers_with_release_and_acquire_at_gpu_scope():
  from pallas_kernels.mgpu import grid_barrier
  text = grid_barrier.exchange(4, 3).trace().lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text.lower()
  # The arrival releases what the CTA wrote; the spin reads at GPU scope, then acquires.
  assert "red.release.gpu.global.add" in text
  assert "ld.relaxed.gpu.global" in text and "fence.acquire.gpu" in text
  # And a proxy fence before the TMA copy reads what the others wrote.
  assert "fence.proxy.async.global" in text


def test_exchange_counts_arrivals_in_one_counter_for_the_grid():
  # A semaphore among plgpu.kernel's scratch shapes is each CTA's own (Pallas passes in one
  # a CTA, 4 here): the barrier would never open. pl.get_global gives one for the grid.
  from pallas_kernels.mgpu import grid_barrier
  text = grid_barrier.exchange(4, 3).trace().lower(lowering_platforms=("cuda",)).as_text()
  assert re.findall(r"tensor<\d+xi32>", text) and set(re.findall(r"tensor<\d+xi32>", text)) == {
      "tensor<1xi32>"}
