"""The tile regression kernel (``tile_regression_mgpu``, 32-256-1024-256-1) with what each
product phase reads that was written a phase or more before (the weight operands of B, C, F's dh2
and G's dh1; the weight tile and activations of F's dW2 and G's dW1) fetched before the grid
barrier it waits for (``early_weights``; ran on the H100 on 2026-12-07h: no gain, so the form
left the kernel: apply early_weights.patch, beside this script, before running it) against the
default, alternating in one process: the same bits after 20 steps and after 220 (the arithmetic
is the same), then us a step (median of rounds).

  PYTHONPATH=. python docs/bench/2026-12-07h_h100/tile_early.py [rounds]
"""
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.fused import tile_regression_mgpu as kernel
from probes import hopper
from probes.grid_regression import problem

SHORT, LONG = 20, 220
ROUNDS = int(sys.argv[1]) if sys.argv[1:] else 7
FORMS = ({}, {"early_weights": True})
d = hopper.require_hopper("tile_early")
print(f"device {d.device_kind}; jax {jax.__version__}", flush=True)
fns = [jax.jit(lambda *a, o=o: kernel.train_steps(*a, 0.002, **o)) for o in FORMS]
args = {n: [jnp.asarray(a) for a in problem(kernel, kernel.WIDTHS, 1, n)] for n in (SHORT, LONG)}
for n in (SHORT, LONG):
  outs = [jax.tree.leaves(fn(*args[n])) for fn in fns]
  same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(outs[1], outs[0]))
  print(f"early_weights: the same bits as the default after {n} steps: {same}", flush=True)
times = [[] for _ in FORMS]
for _ in range(ROUNDS):
  for fn, t in zip(fns, times):
    t.append(hopper.us_per_step(lambda: fn(*args[SHORT]), lambda: fn(*args[LONG]), SHORT, LONG,
                                7))
print(f"tile_regression: us a step, {ROUNDS} rounds alternating:")
for o, t in zip(FORMS, times):
  print(f"  {str(o or 'default'):26s} median {statistics.median(t):6.2f} "
        f"({', '.join(f'{x:.2f}' for x in t)})", flush=True)
