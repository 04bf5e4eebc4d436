"""The regression phase kernels' forms not yet run on a GPU, each against its kernel's default
in one process: ``grid_regression_mgpu`` (32-256-256-1) with barriers 1 and 2 by row quarter
(``quarter_barriers``), with each product's wgmma descriptors computed where it runs
(``fresh_descriptors``), and both; ``tile_regression_mgpu`` (32-256-1024-256-1) with fresh
descriptors. The same bits after a few steps (neither changes the arithmetic), then us a step,
the forms alternating (median of rounds).

  PYTHONPATH=. python docs/bench/next/phase_options.py
"""
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.fused import grid_regression_mgpu, tile_regression_mgpu
from probes import hopper
from probes.grid_regression import problem

SHORT, LONG, ROUNDS = 20, 220, 5
KERNELS = {  # name: (module, widths, the forms' options)
    "grid_regression": (grid_regression_mgpu, (32, 256, 256, 1), (
        {}, {"quarter_barriers": True}, {"fresh_descriptors": True},
        {"quarter_barriers": True, "fresh_descriptors": True})),
    "tile_regression": (tile_regression_mgpu, (32, 256, 1024, 256, 1), (
        {}, {"fresh_descriptors": True})),
}
d = hopper.require_hopper("phase_options")
print(f"device {d.device_kind}; jax {jax.__version__}", flush=True)
for name, (kernel, widths, forms) in KERNELS.items():
  fns = [jax.jit(lambda *a, o=o: kernel.train_steps(*a, 0.002, **o)) for o in forms]
  args = {n: [jnp.asarray(a) for a in problem(kernel, widths, 1, n)] for n in (SHORT, LONG)}
  outs = [[np.asarray(o) for o in fn(*args[SHORT])] for fn in fns]
  for o, out in zip(forms[1:], outs[1:]):
    same = all(np.array_equal(a, b) for a, b in zip(out, outs[0]))
    print(f"{name} {o}: the same bits as the default after {SHORT} steps: {same}", flush=True)
  times = [[] for _ in forms]
  for _ in range(ROUNDS):
    for fn, t in zip(fns, times):
      t.append(hopper.us_per_step(lambda: fn(*args[SHORT]), lambda: fn(*args[LONG]), SHORT,
                                  LONG, 7))
  print(f"{name}: us a step, {ROUNDS} rounds alternating:")
  for o, t in zip(forms, times):
    print(f"  {str(o or 'default'):58s} median {statistics.median(t):6.2f} "
          f"({', '.join(f'{x:.2f}' for x in t)})", flush=True)
