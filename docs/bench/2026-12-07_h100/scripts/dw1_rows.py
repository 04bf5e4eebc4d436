"""The 32-256-256-1 phase kernel with C's product (the dW1 part, 256 x 16) accumulated 256, 128
or 64 rows at a time (``grid_regression_mgpu.DW1_ROWS``): the same bits (each element's sum is
the same instructions), and us a step, the forms alternating in one process (median of rounds).

  PYTHONPATH=. python docs/bench/next/dw1_rows.py
"""
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.fused import grid_regression_mgpu as g
from probes import hopper
from probes.grid_regression import problem

FORMS, SHORT, LONG, ROUNDS = (256, 64, 128), 100, 1100, 3
d = hopper.require_hopper("dw1_rows")
fns = {rows: jax.jit(lambda *a, rows=rows: g.train_steps(*a, 0.002, dw1_rows=rows))
       for rows in FORMS}
args = {n: [jnp.asarray(a) for a in problem(g, (32, 256, 256, 1), 1, n)] for n in (SHORT, LONG)}
outs = {rows: [np.asarray(o) for o in fns[rows](*args[SHORT])] for rows in FORMS}
for rows in FORMS[1:]:
  same = all(np.array_equal(a, b) for a, b in zip(outs[rows], outs[FORMS[0]]))
  print(f"dw1_rows={rows}: the same bits as {FORMS[0]} after {SHORT} steps: {same}", flush=True)
times = {rows: [] for rows in FORMS}
for _ in range(ROUNDS):
  for rows in FORMS:
    times[rows].append(hopper.us_per_step(lambda: fns[rows](*args[SHORT]),
                                          lambda: fns[rows](*args[LONG]), SHORT, LONG, 9))
print(f"device {d.device_kind}; jax {jax.__version__}; us a step, {ROUNDS} rounds alternating:")
for rows in FORMS:
  print(f"  dw1_rows={rows:3d}: median {statistics.median(times[rows]):.2f} "
        f"({', '.join(f'{t:.2f}' for t in times[rows])})", flush=True)
