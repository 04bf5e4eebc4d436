"""What the Mosaic GPU cluster scripts share: the device check and a median launch time."""

import statistics
import sys
import time

import jax


def require_hopper(script: str):
  """The first device, or exit with one line if it cannot run Mosaic GPU clusters."""
  d = jax.devices()[0]
  cc = getattr(d, "compute_capability", None)
  if d.platform != "gpu" or cc is None or float(cc) < 9.0:
    sys.exit(f"error: {script} needs an NVIDIA Hopper (or newer) GPU for Mosaic GPU "
             f"clusters; this machine has {d.platform}: {d.device_kind}")
  return d


def median_seconds(fn, repeats: int) -> float:
  """Median wall time of ``fn()`` over ``repeats`` calls, after one to compile and warm up."""
  jax.block_until_ready(fn())
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def us_per_step(run_short, run_long, short_steps: int, long_steps: int, repeats: int) -> float:
  """Microseconds a step from launches of ``short_steps`` and ``long_steps`` steps (each the
  median of ``repeats`` calls): their difference over the difference in steps, so the launch
  itself drops out."""
  short = median_seconds(run_short, repeats)
  return 1e6 * (median_seconds(run_long, repeats) - short) / (long_steps - short_steps)


def trace_spans(trace_dir: str):
  """The newest Mosaic GPU profiler trace in ``trace_dir``: each (CTA, scope)'s durations in
  us, in order, and each CTA's first and last event time (one trace "tid" a CTA)."""
  import collections
  import glob
  import json
  import os
  newest = max(glob.glob(os.path.join(trace_dir, "*trace.json")), key=os.path.getmtime)
  opened, spans = collections.defaultdict(list), collections.defaultdict(list)
  first, last = {}, {}
  for e in json.load(open(newest))["traceEvents"]:
    key = (e["tid"], e["name"])
    if e["ph"] == "B":
      opened[key].append(e["ts"])
      first[e["tid"]] = min(first.get(e["tid"], e["ts"]), e["ts"])
    else:
      spans[key].append(e["ts"] - opened[key].pop())
      last[e["tid"]] = max(last.get(e["tid"], e["ts"]), e["ts"])
  return spans, first, last


def scope_times(spans, names):
  """(name, median, largest) of each scope of ``names`` that ``trace_spans``' spans hold, over
  every traced thread and occurrence."""
  times = [(name, [t for (_, n), ts in spans.items() if n == name for t in ts]) for name in names]
  return [(name, statistics.median(v), max(v)) for name, v in times if v]


def per_walk(spans, name: str, walks: int) -> float:
  """The median over traced threads of a scope's total time a walk (its occurrences in a thread
  summed, over ``walks``): for scopes that a walk runs many times."""
  totals = [sum(ts) / walks for (_, n), ts in spans.items() if n == name]
  return statistics.median(totals)


def traced_span(first, last, count: int):
  """(median, largest) over the traced threads of their first-to-last span over ``count``."""
  span = [(last[c] - first[c]) / count for c in first]
  return statistics.median(span), max(span)
