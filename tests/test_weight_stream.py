"""probes.weight_stream's kernel (probes.weight_stream_kernel: no flags, so importing it here
leaves other scripts' flags alone) lowers for a Hopper GPU in each of its forms (Mosaic GPU checks
layouts and shared memory at lowering; the profiled form lowers only beside a GPU), and the
probes' trace reader; the times come from the device."""

import json
import os

import pytest

from probes import hopper, weight_stream_kernel as weight_stream


@pytest.mark.parametrize("products,x,work", [(True, "held", "all"), (True, "own", "tensor"),
                                             (True, "shared", "threads"), (False, "own", "all")])
def test_kernel_lowers(products, x, work):
  fn, xb = weight_stream.stream(2, 192, 128, 3, products, x, work)  # three tiles: odd, in flight
  text = fn.trace(xb).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text


@pytest.mark.parametrize("products", [True, False])
def test_reversed_walk_lowers(products):
  """Odd steps walking the tiles last to first (``reverse``): another kernel, which lowers."""
  texts = [weight_stream.stream(2, 192, 128, 3, products, "own", reverse=r)[0].trace(
      weight_stream.stream(2, 192, 128, 3, products, "own")[1]).lower(
          lowering_platforms=("cuda",)).as_text() for r in (False, True)]
  assert all("mosaic_gpu" in t for t in texts) and texts[0] != texts[1]


@pytest.mark.parametrize("tiles", [3, 13])
def test_reversed_walk_visits_every_tile_once(tiles):
  """Even steps walk 0 .. tiles - 1, odd steps the reverse; one order without ``reverse``."""
  import jax.numpy as jnp
  for s in range(4):
    order = [int(weight_stream.tile_at(k, jnp.int32(s), tiles, True)) for k in range(tiles)]
    assert order == (list(range(tiles)) if s % 2 == 0 else list(range(tiles))[::-1])
    assert [weight_stream.tile_at(k, jnp.int32(s), tiles, False) for k in range(tiles)] == \
        list(range(tiles))


@pytest.mark.parametrize("warpgroups,x", [(1, "held"), (2, "own"), (2, "shared")])
def test_register_form_lowers(warpgroups, x):
  """W^T's tiles, the forward's parts from registers (the tensor cores' A operand)."""
  fn, xb = weight_stream.stream_registers(2, 192, warpgroups, 3, x)
  assert "mosaic_gpu" in fn.trace(xb).lower(lowering_platforms=("cuda",)).as_text()


def test_trace_spans_pairs_each_scope_by_cta(tmp_path):
  """probes.hopper.trace_spans, which the probes' --profile read: each (CTA, scope)'s
  durations in order, each CTA's first and last event."""
  events = []
  for cta in (0, 1):
    for step in range(2):
      t = 100 * step + cta
      events += [{"tid": cta, "name": "a", "ph": "B", "ts": t},
                 {"tid": cta, "name": "b", "ph": "B", "ts": t + 1},  # nested in a
                 {"tid": cta, "name": "b", "ph": "E", "ts": t + 4},
                 {"tid": cta, "name": "a", "ph": "E", "ts": t + 5 + step}]
  (tmp_path / "old-trace.json").write_text(json.dumps({"traceEvents": []}))
  os.utime(tmp_path / "old-trace.json", (0, 0))
  (tmp_path / "new-trace.json").write_text(json.dumps({"traceEvents": events}))
  spans, first, last = hopper.trace_spans(str(tmp_path))
  assert spans[(0, "a")] == [5, 6] and spans[(1, "b")] == [3, 3]
  assert first == {0: 0, 1: 1} and last == {0: 106, 1: 107}
