"""The streamed population kernel (``stream_population_mgpu``) with each product's wgmma
descriptors built where it runs (``fresh_descriptors``; off when this ran, the default with jax
0.11 since) against the form before it (pinned off), alternating
in one process: the same bits after a few steps (the arithmetic is the same), then us a step
(median of rounds) at each population size; the last line says whether the form was faster
by more than 1 % at every size.

  PYTHONPATH=. python docs/bench/2026-12-07f_h100/stream_fresh.py 64 512
  PYTHONPATH=. python docs/bench/2026-12-07f_h100/stream_fresh.py dump fresh
      # one launch of 8 members (with MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=dir)
"""
import statistics
import sys

import jax
import numpy as np

from pallas_kernels.fused import stream_population_mgpu as k
from probes import hopper
from probes.stream_population import problem

SHORT, LONG, ROUNDS = 10, 60, 5
d = hopper.require_hopper("stream_fresh")
print(f"device {d.device_kind}; jax {jax.__version__}", flush=True)
if sys.argv[1:2] == ["dump"]:  # One small launch of one form, for ptxas' report
  form = {"fresh_descriptors": sys.argv[2:3] == ["fresh"]}
  jax.block_until_ready(jax.jit(lambda *a: k.train_steps(*a, **form))(*problem(8, 2, False)))
  sys.exit(0)
faster = []
for members in map(int, sys.argv[1:] or ["64"]):
  forms = ({"fresh_descriptors": False}, {"fresh_descriptors": True})
  fns = [jax.jit(lambda *a, o=o: k.train_steps(*a, **o)) for o in forms]
  args = {n: problem(members, n, False) for n in (SHORT, LONG)}
  outs = [jax.tree.leaves(fn(*args[SHORT])) for fn in fns]
  same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(*outs))
  print(f"{members} members: the same bits after {SHORT} steps: {same}", flush=True)
  times = [[] for _ in forms]
  for _ in range(ROUNDS):
    for fn, t in zip(fns, times):
      t.append(hopper.us_per_step(lambda: fn(*args[SHORT]), lambda: fn(*args[LONG]), SHORT,
                                  LONG, 5))
  for o, t in zip(forms, times):
    print(f"  {str(o or 'default'):28s} median {statistics.median(t):7.2f} us a step "
          f"({', '.join(f'{x:.2f}' for x in t)})", flush=True)
  faster.append(same and statistics.median(times[1]) < 0.99 * statistics.median(times[0]))
print(f"stream faster: {'fresh_descriptors' if faster and all(faster) else 'none'}", flush=True)
