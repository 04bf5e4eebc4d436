"""One form of the tile regression kernel (32-256-1024-256-1) on the GPU: checked as
``check_kernels --only=tile_regression`` checks it (float64, twice xla's distance; the same bits
twice), then timed as ``probes.grid_regression`` times it (us a step).

  MOSAIC_GPU_DUMP_PTXAS=1 python variants.py ONE_ACC W3_IN_SMEM [C_IN_SMEM]   (each 0 or 1)
"""
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np

from experiments import check_kernels
from pallas_kernels.fused import tile_regression_mgpu as k
from probes import grid_regression, hopper

form = dict(one_acc=bool(int(sys.argv[1])), w3_in_smem=bool(int(sys.argv[2])))
if len(sys.argv) > 3:
  form["c_in_smem"] = bool(int(sys.argv[3]))
k.train_steps = functools.partial(k.train_steps, **form)
print("form", form, "jax", jax.__version__, jax.devices()[0].device_kind, flush=True)
for case, precision, err, *bound in check_kernels.tile_regression_cases(
    np.random.default_rng(0), False):
  print(f"  {case}: {err:.2e}" + (f" (bound {bound[0]:.2e})" if bound else ""), flush=True)


def launch(steps):
  args = [jnp.asarray(a) for a in grid_regression.problem(k, k.WIDTHS, 1, steps)]
  fn = jax.jit(lambda *a: k.train_steps(*a, 0.002))
  return lambda: fn(*args)


us = hopper.us_per_step(launch(100), launch(1100), 100, 1100, 9)
print(f"  {us:.2f} us a step", flush=True)
