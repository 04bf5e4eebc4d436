"""Forms of the phase kernels not yet run on a GPU, each against its kernel's default in one
process: ``tile_regression_mgpu`` (32-256-1024-256-1) with each half of K in its own
accumulator, its products run while the next half lands (``overlap_halves``). Whether the
bits are the same after a few steps (not expected: the halves are added at the end), then us a
step, the forms alternating (median of rounds); the last line names each form faster than the
default by more than 1 %. (Its first form, run on 2026-12-07: docs/bench/2026-12-07b_h100.)

  PYTHONPATH=. python docs/bench/next/phase_options.py
"""
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from jaxshallow import mlp
from pallas_kernels.fused import tile_mlp_mgpu, tile_regression_mgpu
from probes import hopper
from probes.grid_regression import problem

SHORT, LONG, ROUNDS = 20, 220, 5
KERNELS = {  # name: (module, widths, the forms' options)
    "tile_regression": (tile_regression_mgpu, (32, 256, 1024, 256, 1), (
        {}, {"overlap_halves": True})),
}


def mlp_problem(steps: int):  # tile_mlp's arguments: random pixels and labels, He weights
  rng = np.random.default_rng(1)
  n = steps * tile_mlp_mgpu.BATCH
  x = jnp.asarray(rng.integers(0, 256, (n, 784)).astype(np.uint8))
  y = jnp.asarray(rng.integers(0, 10, n))
  params = mlp.init_mlp(jax.random.key(1), tile_mlp_mgpu.WIDTHS)
  return (params, *tile_mlp_mgpu.batches(x, y, jnp.arange(n, dtype=jnp.int32), steps))

d = hopper.require_hopper("phase_options")
print(f"device {d.device_kind}; jax {jax.__version__}", flush=True)
for name, (kernel, widths, forms) in KERNELS.items():
  lr = 0.1 if name == "tile_mlp" else 0.002
  fns = [jax.jit(lambda *a, o=o, lr=lr: kernel.train_steps(*a, lr, **o)) for o in forms]
  args = {n: (mlp_problem(n) if name == "tile_mlp"
              else [jnp.asarray(a) for a in problem(kernel, widths, 1, n)]) for n in (SHORT, LONG)}
  outs = [jax.tree.leaves(fn(*args[SHORT])) for fn in fns]
  for o, out in zip(forms[1:], outs[1:]):
    same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(out, outs[0]))
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
  base = statistics.median(times[0])
  faster = [o for o, t in zip(forms[1:], times[1:]) if statistics.median(t) < 0.99 * base]
  print(f"{name} faster: {' '.join(k for o in faster for k in o) or 'none'}", flush=True)
