"""The streamed population kernel (``stream_population_mgpu``) with odd steps walking W0^T's
tiles last to first (``reverse_odd``), against the default, alternating in one process: the
largest difference of the two forms' weights after a few steps relative to the weights' scale
(the forward's sums run in another order, so not the same bits), then us a step (median of
rounds) at each population size; the last line says whether the form was faster by more than
1 % at every size with the two forms' outputs within 1e-4 of their largest value.

  PYTHONPATH=. python docs/bench/2026-12-08_h100/stream_reverse.py 64 512
"""
import statistics
import sys

import jax
import numpy as np

from pallas_kernels.fused import stream_population_mgpu as k
from probes import hopper
from probes.stream_population import problem

SHORT, LONG, ROUNDS = 10, 60, 5
d = hopper.require_hopper("stream_reverse")
print(f"device {d.device_kind}; jax {jax.__version__}", flush=True)
faster = []
for members in map(int, sys.argv[1:] or ["64"]):
  forms = ({"reverse_odd": False}, {"reverse_odd": True})
  fns = [jax.jit(lambda *a, o=o: k.train_steps(*a, **o)) for o in forms]
  args = {n: problem(members, n, False) for n in (SHORT, LONG)}
  outs = [jax.tree.leaves(fn(*args[SHORT])) for fn in fns]
  diff = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
             / max(float(np.max(np.abs(np.asarray(a, np.float64)))), 1e-30)
             for a, b in zip(*outs))
  print(f"{members} members: after {SHORT} steps the forms differ by at most {diff:.2e} of "
        f"an output's largest value", flush=True)
  times = [[] for _ in forms]
  for _ in range(ROUNDS):
    for fn, t in zip(fns, times):
      t.append(hopper.us_per_step(lambda: fn(*args[SHORT]), lambda: fn(*args[LONG]), SHORT,
                                  LONG, 5))
  for o, t in zip(forms, times):
    print(f"  {str(o):24s} median {statistics.median(t):7.2f} us a step "
          f"({', '.join(f'{x:.2f}' for x in t)})", flush=True)
  faster.append(diff < 1e-4 and statistics.median(times[1]) < 0.99 * statistics.median(times[0]))
print(f"stream faster: {'reverse_odd' if faster and all(faster) else 'none'}", flush=True)
