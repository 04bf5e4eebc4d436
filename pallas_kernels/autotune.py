"""Pick the fastest valid block sizes of the dense kernels per shape, once, and remember them.

``tune_dense`` times forward + backward of ``dense.dense`` for each candidate (compiled, warmed
up, median of repeats), skips candidates that fail to compile or run, and records the winner in
an in-memory table and in ``$XDG_CACHE_HOME/jaxshallow/autotune.json`` keyed by device. Ops built
with ``blocks="auto"`` look the table up while tracing, so tune before the first trace.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels import common
from pallas_kernels.ops import dense

CANDIDATES = [(16, 16, 16), (16, 16, 64), (16, 16, 128), (32, 32, 32), (32, 32, 64),
              (64, 64, 32), (64, 64, 64), (32, 128, 32), (128, 64, 32), (128, 128, 32),
              (128, 128, 64), (256, 128, 32)]
_TABLE: dict[str, tuple] = {}


def _key(m, k, n, relu, precision):
  d = jax.devices()[0]
  return f"{d.platform}:{d.device_kind}|{m}x{k}x{n}|relu={relu}|{precision}"


def cache_file() -> str:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "jaxshallow", "autotune.json")


def _load_cache():
  if not _TABLE and os.path.exists(cache_file()):
    try:
      with open(cache_file()) as f:
        _TABLE.update({k: tuple(tuple(p) for p in v) for k, v in json.load(f).items()})
    except (OSError, ValueError):
      pass  # An unreadable cache is only a lost speed-up: tune again.


def _save_cache():
  """Write the table atomically (a temporary file renamed), so a crash leaves the old one."""
  path = cache_file()
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
      json.dump({k: [list(p) for p in v] for k, v in _TABLE.items()}, f, indent=2)
    os.replace(tmp, path)
  except OSError:
    pass  # No cache is only a lost speed-up.


def lookup(m, k, n, relu, precision):
  """The tuned blocks for this shape as (name, value) pairs, or None (the defaults)."""
  _load_cache()
  return _TABLE.get(_key(m, k, n, relu, precision))


def time_dense(m, k, n, relu, precision, blocks, repeats=20, interpret=None):
  """Median seconds of one forward + backward of the dense kernels with ``blocks``."""
  if interpret is None:
    interpret = common.interpret_default()
  rng = np.random.default_rng(0)
  x, w = jnp.asarray(rng.standard_normal((m, k), np.float32)), jnp.asarray(
      rng.standard_normal((k, n), np.float32))
  b, dy = jnp.zeros((n,), jnp.float32), jnp.asarray(rng.standard_normal((m, n), np.float32))
  fn = jax.jit(lambda x, w, b: jax.vjp(
      lambda *a: dense.dense(*a, relu=relu, precision=precision, blocks=blocks,
                             interpret=interpret), x, w, b)[1](dy))
  jax.block_until_ready(fn(x, w, b))  # Compile and warm up.
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(x, w, b))
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def tune_dense(m, k, n, relu, precision="float32", candidates=CANDIDATES, repeats=20,
               interpret=None, log=None):
  """The fastest valid candidate for this shape (cached); returns its (name, value) pairs."""
  found = lookup(m, k, n, relu, precision)
  if found is not None:
    return found
  timings = {}
  for bm, bn, bk in candidates:
    blocks = (("block_m", bm), ("block_n", bn), ("block_k", bk))
    try:
      timings[blocks] = time_dense(m, k, n, relu, precision, blocks, repeats, interpret)
    except Exception as e:  # noqa: BLE001 -- a candidate that does not compile is skipped.
      if log:
        log(f"autotune {m}x{k}x{n}: {bm}x{bn}x{bk} failed ({type(e).__name__})")
  if not timings:
    raise RuntimeError(f"no block candidate compiled for dense {m}x{k}x{n}")
  best = min(timings, key=timings.get)
  if log:
    log(f"autotune dense {m}x{k}x{n} relu={relu}: best {'x'.join(str(v) for _, v in best)} "
        f"{timings[best] * 1e6:.1f} us (of {len(timings)} valid)")
  _TABLE[_key(m, k, n, relu, precision)] = best
  _save_cache()
  return best
