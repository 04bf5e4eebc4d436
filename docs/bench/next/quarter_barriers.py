"""The 32-256-256-1 phase kernel with barriers 1 and 2 among a row quarter's 16 CTAs
(``grid_regression_mgpu.QUARTER_BARRIERS``) against all 64: the same bits after 100 steps (the
barriers change no arithmetic), and us a step, the two forms alternating in one process
(median of rounds).

  PYTHONPATH=. python docs/bench/next/quarter_barriers.py
"""
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.fused import grid_regression_mgpu as g
from probes import hopper
from probes.grid_regression import problem

FORMS, SHORT, LONG, ROUNDS = (False, True), 100, 1100, 5
d = hopper.require_hopper("quarter_barriers")
fns = {q: jax.jit(lambda *a, q=q: g.train_steps(*a, 0.002, quarter_barriers=q)) for q in FORMS}
args = {n: [jnp.asarray(a) for a in problem(g, (32, 256, 256, 1), 1, n)] for n in (SHORT, LONG)}
outs = {q: [np.asarray(o) for o in fns[q](*args[SHORT])] for q in FORMS}
same = all(np.array_equal(a, b) for a, b in zip(outs[True], outs[False]))
print(f"quarter barriers: the same bits as grid barriers after {SHORT} steps: {same}", flush=True)
times = {q: [] for q in FORMS}
for _ in range(ROUNDS):
  for q in FORMS:
    times[q].append(hopper.us_per_step(lambda: fns[q](*args[SHORT]),
                                       lambda: fns[q](*args[LONG]), SHORT, LONG, 9))
print(f"device {d.device_kind}; jax {jax.__version__}; us a step, {ROUNDS} rounds alternating:")
for q in FORMS:
  print(f"  barriers 1-2 {'by quarter' if q else 'grid-wide '}: median "
        f"{statistics.median(times[q]):.2f} ({', '.join(f'{t:.2f}' for t in times[q])})",
        flush=True)
