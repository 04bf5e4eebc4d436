"""dense_mgpu (an accumulator a K step) and tile_regression_mgpu (one a half of K) against main's
forms (one accumulator over all of K; 0365671, copied to .data/old/), in one process: distance
from float64 on the same fresh inputs, and time. Run from the checkout root on a Hopper GPU."""

import functools
import importlib.util
import sys

import jax
import jax.numpy as jnp
import numpy as np

from experiments import check_kernels as ck
from jaxshallow import mlp, models, synthetic
from pallas_kernels import common
from pallas_kernels.fused import tile_regression_mgpu as tile_new
from pallas_kernels.ops import dense_mgpu as dense_new
from probes import hopper


def load(name, path):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


dense_old = load("dense_mgpu_main", ".data/old/dense_mgpu.py")
tile_old = load("tile_regression_main", ".data/old/tile_regression_mgpu.py")
print(f"device {jax.devices()[0].device_kind}; jax {jax.__version__}", flush=True)

# dense_mgpu: 3xTF32 forward (bias, ReLU) and dW (8 splits) at the MLP's batch-8192 shapes.
rng = np.random.default_rng(20261129)
for (m, n, k), tiles in [((8192, 256, 784), dense_new.X3_FWD_TILES),
                         ((784, 256, 8192), dense_new.X3_DW_TILES)]:
  errs = {"main": [], "new": []}
  times = {}
  for draw in range(3):
    a = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((n, k)) / np.sqrt(k), jnp.float32)
    want = np.asarray(a, np.float64) @ np.asarray(b, np.float64).T
    ab = (dense_new.split_tf32(a), dense_new.split_tf32(b))
    xla = jnp.dot(a, b.T, precision=jax.lax.Precision.HIGHEST)
    errs.setdefault("xla", []).append(ck.rel_err(xla, want))
    for name, mod in (("main", dense_old), ("new", dense_new)):
      fn = jax.jit(functools.partial(mod.matmul_nt, tiles=tiles))
      got = fn(*ab)
      if tiles.splits > 1:
        got = common.sum_parts(got)
      errs[name].append(ck.rel_err(got, want))
      if draw == 0:
        times[name] = 1e6 * hopper.median_seconds(lambda: fn(*ab), 50)
  print(f"matmul_nt 3xTF32 m={m} n={n} k={k} splits={tiles.splits}: relative error from float64 "
        + ", ".join(f"{k_} {' '.join(f'{e:.2e}' for e in v)}" for k_, v in errs.items())
        + "; us a call " + ", ".join(f"{k_} {v:.1f}" for k_, v in times.items()), flush=True)

# tile_regression: 1 and 100 steps against float64 train_step (the same inputs for both forms),
# then us a step (launches of 100 and 1100 steps, median of 5).
for steps in (1, 100):
  kk = tile_new
  nrows = steps * kk.BATCH + 5
  x, y = synthetic.make_regression(nrows, rng, kk.INPUTS)
  order, lr = rng.permutation(nrows).astype(np.int32), 0.002
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), kk.WIDTHS, bias=False)
  inputs = (params, x, y, order, lr, "sgd", kk.BATCH, models.REGRESSION, steps)
  reference = ck._epoch_reference(*inputs)
  _, xla = ck._float32_bound(reference, *inputs)
  line = [f"xla {xla:.2e}"]
  for name, mod in (("main", tile_old), ("new", tile_new)):
    fn = jax.jit(functools.partial(mod.train_epoch, lr=lr, steps=steps, use_kernel=True))
    got, losses = fn(params, x, y, order)
    line.append(f"{name} {ck._distance(losses, jax.tree.leaves(got), *reference):.2e}")
  print(f"tile regression {steps} steps, distance from float64: " + ", ".join(line), flush=True)

from probes.grid_regression import problem  # noqa: E402
for name, mod in (("main", tile_old), ("new", tile_new)):
  fn = jax.jit(lambda *a, mod=mod: mod.train_steps(*a, 0.002))

  def launch(steps, fn=fn, mod=mod):
    args = [jnp.asarray(a) for a in problem(mod, mod.WIDTHS, 1, steps)]
    return lambda: fn(*args)
  us = hopper.us_per_step(launch(100), launch(1100), 100, 1100, 5)
  print(f"tile regression {name}: {us:.2f} us a step", flush=True)
