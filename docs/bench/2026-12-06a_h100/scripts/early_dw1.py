"""grid_regression_mgpu's step in its ``early`` form against the kernel before (early=False),
alternating in one process; and whether both give the same bits. Needs the kernel with
``late_w1.patch`` (beside this script: call 4's form; calls 2 and 3 ran earlier forms, not kept)
applied: main's kernel has no ``early``. Checkout root, PYTHONPATH=., a Hopper GPU."""
import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.fused import grid_regression_mgpu as k
from probes import hopper
from probes.grid_regression import SHORT, problem

ORIG = k._call
LONG = 1_100


def form(early):
  k._call = lambda steps, lr, profile_dir=None: ORIG(steps, lr, profile_dir, early)
  fn = jax.jit(lambda *a: k.train_steps(*a, 0.002))

  def launch(steps):
    args = [jnp.asarray(a) for a in problem(k, (32, 256, 256, 1), 1, steps)]
    return lambda: fn(*args)
  return launch


print(f"device {jax.devices()[0].device_kind}; jax {jax.__version__}", flush=True)
outs, times = {}, {False: [], True: []}
for rnd in range(3):
  for early in (False, True):
    launch = form(early)
    us = hopper.us_per_step(launch(SHORT), launch(LONG), SHORT, LONG, 9)
    times[early].append(us)
    outs[early] = [np.asarray(a) for a in jax.block_until_ready(launch(SHORT)())]
    print(f"round {rnd} early={early}: {us:.2f} us a step", flush=True)
same = all(np.array_equal(a, b) for a, b in zip(outs[False], outs[True]))
print(f"same bits after {SHORT} steps: {same}")
for early in (False, True):
  print(f"early={early}: median {np.median(times[early]):.2f} us a step "
        f"({', '.join(f'{t:.2f}' for t in times[early])})")
