"""The regression nets' phase kernels (Pallas Mosaic GPU, Hopper) timed per step: 32-256-256-1's
(``pallas_kernels.fused.grid_regression_mgpu``), with Mosaic GPU's per-phase profile, and
32-256-1024-256-1's (``tile_regression_mgpu``).

  python -m probes.grid_regression              # us a step
  python -m probes.grid_regression --profile    # and each phase's median, over the 64 CTAs
  python -m probes.grid_regression --kernel=tile_regression --floor   # and without products
  python -m probes.grid_regression --kernel=tile_regression --fetches  # every product on the
                                                    # first parts: all fetched, or those only

The cost of a step is the difference between launches of ``--steps`` and 100 steps over the
difference in steps (median of ``--repeats`` each), so the launch drops out. Its numbers are
checked by ``experiments.check_kernels --only=grid_regression,tile_regression``.
"""

import os
import statistics

import numpy as np
from absl import flags

from jaxshallow import synthetic
from jaxshallow.reference import numpy_mlp
from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from pallas_kernels.fused import grid_regression_mgpu, tile_regression_mgpu
from probes import hopper
from probes.cluster_regression import phase_times

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 1_100, "Steps of the long launch (the short has 100).")
flags.DEFINE_integer("repeats", 9, "Timed launches of each (median).")
flags.DEFINE_float("lr", 0.002, "SGD learning rate (the study's).")
flags.DEFINE_bool("profile", False, "Also time each phase with Mosaic GPU's profiler.")
flags.DEFINE_enum("kernel", "grid_regression", ["grid_regression", "tile_regression"],
                  "Which: grid_regression (32-256-256-1) or tile_regression (32-256-1024-256-1).")
flags.DEFINE_bool("floor", False, "Also time tile_regression with 0, 1 and 3 of its 6 products "
                  "of parts (wrong numbers: what the rest of its step costs).")
flags.DEFINE_bool("fetches", False, "Also time tile_regression with every product on the "
                  "operands' first parts, fetching all three or only those (wrong numbers: what "
                  "the fetches and the distinct parts cost).")
flags.DEFINE_string("profile_dir", "/tmp/grid_regression", "Where the profiler writes traces.")

SHORT = 100


KERNELS = {"grid_regression": (grid_regression_mgpu, (32, 256, 256, 1)),
           "tile_regression": (tile_regression_mgpu, tile_regression_mgpu.WIDTHS)}


def problem(kernel, widths, seed: int, steps: int):
  rng = np.random.default_rng(seed)
  x, y = synthetic.make_regression(steps * kernel.BATCH, rng, kernel.INPUTS)
  w = [layer["w"] for layer in numpy_mlp.init_mlp(rng, widths)]
  return (*w[:-1], w[-1][:, 0], x.reshape(steps, kernel.BATCH, kernel.INPUTS),
          y.reshape(steps, kernel.BATCH))


def main(argv):
  del argv
  import jax
  import jax.numpy as jnp
  if FLAGS.steps <= SHORT:
    raise ConfigError(f"--steps must be above {SHORT}, got {FLAGS.steps}")
  cli.at_least("repeats", FLAGS.repeats, 1)
  kernel, widths = KERNELS[FLAGS.kernel]
  if (FLAGS.floor or FLAGS.fetches) and FLAGS.kernel != "tile_regression":
    raise ConfigError("--floor, --fetches: only --kernel=tile_regression leaves its products or "
                      "fetches out")
  d = hopper.require_hopper(FLAGS.kernel)
  fn = jax.jit(lambda *a: kernel.train_steps(*a, FLAGS.lr))

  def launch(steps):
    args = [jnp.asarray(a) for a in problem(kernel, widths, 1, steps)]
    return lambda: fn(*args)
  us = hopper.us_per_step(launch(SHORT), launch(FLAGS.steps), SHORT, FLAGS.steps, FLAGS.repeats)
  print(f"device {d.device_kind}; jax {jax.__version__}; {'-'.join(map(str, widths))} batch 256, "
        f"{kernel.CTAS} CTAs: {us:.2f} us a step", flush=True)
  variants = [(products, 3, False) for products in (0, 1, 3)] if FLAGS.floor else []
  variants += [(6, 3, True), (6, 1, True), (0, 1, True)] if FLAGS.fetches else []
  for products, parts, first in variants:  # Of the six products of parts; of each operand's
    # parts fetched; every product on the first parts
    def launch_bare(steps, products=products, parts=parts, first=first):
      bare = jax.jit(lambda *a: kernel.train_steps(*a, FLAGS.lr, products=products, parts=parts,
                                                   first_only=first))
      args = [jnp.asarray(a) for a in problem(kernel, widths, 1, steps)]
      return lambda: bare(*args)
    floor = hopper.us_per_step(launch_bare(SHORT), launch_bare(FLAGS.steps), SHORT, FLAGS.steps,
                               FLAGS.repeats)
    print(f"  with {products} of its {len(kernel.PAIRS)} products of parts"
          f"{' (all on the first parts)' if first else ''}, {parts} of 3 parts fetched: "
          f"{floor:.2f} us a step", flush=True)
  if FLAGS.profile:
    steps = 8  # The profiler's buffer shares shared memory with the kernel's.
    args = [jnp.asarray(a) for a in problem(kernel, widths, 1, steps)]
    prof = jax.jit(lambda *a: kernel.train_steps(*a, FLAGS.lr, profile_dir=FLAGS.profile_dir))
    os.makedirs(FLAGS.profile_dir, exist_ok=True)
    jax.block_until_ready(prof(*args))
    jax.block_until_ready(prof(*args))  # The second run's trace.
    times = phase_times(FLAGS.profile_dir)
    ctas = sorted({cta for cta, _ in times})
    print(f"{steps} steps under the profiler: us a step (median over steps), the median and "
          f"the largest over {len(ctas)} CTAs (the profiler's own cost included)")
    total = 0.0
    for name in kernel.PHASES:
      v = [times[(c, name)] for c in ctas if (c, name) in times]
      if v:
        total += statistics.median(v)
        print(f"  {name:12s} {statistics.median(v):7.3f} {max(v):7.3f}")
    print(f"  {'sum':12s} {total:7.3f}", flush=True)


if __name__ == "__main__":
  cli.run(main)
