"""The regression net's cluster kernel (``pallas_kernels.fused.cluster_epoch_mgpu``, Pallas
Mosaic GPU, Hopper) checked against float64 and timed per step, with Mosaic GPU's per-phase
profile.

  python -m probes.cluster_regression                  # 32-256-1: 8 CTAs
  python -m probes.cluster_regression --hidden=128,512 --profile

The network is the study's 32 -> H (ReLU) -> 1, no biases, mean squared error, plain SGD, batch
256; one launch runs ``--steps`` steps in one cluster of (H / 64) x 2 CTAs (the kernel's
docstring has the design). It reports the largest differences from a float64 NumPy run of the
same steps and the cost of a step (launches of ``--steps`` and of 100 steps, median of
``--repeats`` each, so the launch drops out); ``--profile`` adds Mosaic GPU's per-phase timings
(traces under --profile_dir).
"""

import os
import statistics
import sys
import time

import numpy as np
from absl import flags

from jaxshallow import synthetic
from jaxshallow.reference import numpy_mlp
from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from pallas_kernels.fused import cluster_epoch_mgpu
from probes import hopper

FLAGS = flags.FLAGS


def define_flags():
  """Defined when run as a script only, so tests can import the module beside other scripts."""
  flags.DEFINE_list("hidden", ["256"], "Hidden widths, multiples of 64 up to 512.")
  flags.DEFINE_integer("steps", 1_000, "Steps of the long launch (the short has 100).")
  flags.DEFINE_integer("repeats", 15, "Timed launches of each (median).")
  flags.DEFINE_float("lr", 0.002, "SGD learning rate (the study's).")
  flags.DEFINE_bool("profile", False, "Also time each phase with Mosaic GPU's profiler.")
  flags.DEFINE_string("profile_dir", "/tmp/cluster_regression",
                      "Where the profiler writes its traces.")


SHORT = 100


def train(lr: float, profile_dir: str | None = None):
  """A jitted function (w0 (32, H), w1 (H,), xs (S, 256, 32), ys (S, 256)) -> (w0, w1, losses)
  that runs the S SGD steps in one launch of the cluster kernel."""
  import jax
  return jax.jit(lambda w0, w1, xs, ys: cluster_epoch_mgpu.train_steps(w0, w1, xs, ys, lr, profile_dir))


def reference(w0, w1, xs, ys, lr: float):
  """The same steps in float64 with the project's NumPy reference: (w0, w1, losses)."""
  params = [{"w": np.float64(w0)}, {"w": np.float64(w1)[:, None]}]
  _, sgd = numpy_mlp.sgd(lr)
  losses = []
  for x, y in zip(np.float64(xs), np.float64(ys)):
    loss, grads, _ = numpy_mlp.loss_and_grads(params, x, y, loss="mse")
    params, _ = sgd(grads, (), params)
    losses.append(loss)
  return params[0]["w"], params[1]["w"][:, 0], np.array(losses)


def problem(hidden: int, seed: int, steps: int):
  """``steps`` batches of the study's data (``synthetic.make_regression``) and He-initialised
  weights (``numpy_mlp.init_mlp``, biases left out)."""
  rng = np.random.default_rng(seed)
  batch, inputs = cluster_epoch_mgpu.BATCH, cluster_epoch_mgpu.INPUTS
  x, y = synthetic.make_regression(steps * batch, rng, inputs)
  w0, w1 = (layer["w"] for layer in numpy_mlp.init_mlp(rng, (inputs, hidden, 1)))
  return w0, w1[:, 0], x.reshape(steps, batch, inputs), y.reshape(steps, batch)


def phase_times(trace_dir: str) -> dict:
  """Median microseconds of each phase over the steps, CTA by CTA, from the newest trace."""
  spans, _, _ = hopper.trace_spans(trace_dir)
  return {key: statistics.median(v) for key, v in spans.items()}


def check_and_time(hidden: int):
  import jax
  import jax.numpy as jnp
  w0, w1, xs, ys = problem(hidden, 0, SHORT)
  t0 = time.perf_counter()
  got = [np.asarray(v) for v in jax.block_until_ready(train(FLAGS.lr)(
      w0, w1, xs, ys))]
  compile_s = time.perf_counter() - t0
  want = reference(w0, w1, xs, ys, FLAGS.lr)
  loss_err = float(np.max(np.abs(got[2] - want[2]) / want[2]))
  w_err = max(float(np.max(np.abs(g - w) / np.max(np.abs(w)))) for g, w in zip(got, want[:2]))
  def launch(steps):  # A call of the kernel over ``steps`` steps.
    args = [jnp.asarray(a) for a in problem(hidden, 1, steps)]
    fn = train(FLAGS.lr)
    return lambda: fn(*args)
  us = hopper.us_per_step(launch(SHORT), launch(FLAGS.steps), SHORT, FLAGS.steps, FLAGS.repeats)
  return us, loss_err, w_err, compile_s, got[2][-1], want[2][-1]


def main(argv):
  del argv
  import jax
  hidden = cli.ints("hidden", FLAGS.hidden)
  for h in hidden:
    why = cluster_epoch_mgpu.problem((32, h, 1), cluster_epoch_mgpu.BATCH, bias=False,
                                     optimizer="sgd", dtype="float32")
    if why:
      raise ConfigError(f"--hidden={h}: the kernel cannot train 32-{h}-1: {why}")
  if FLAGS.steps <= SHORT:
    raise ConfigError(f"--steps must be above {SHORT}, got {FLAGS.steps}")
  cli.at_least("repeats", FLAGS.repeats, 1)
  cli.positive("lr", FLAGS.lr)
  d = hopper.require_hopper("cluster_regression")
  print(f"device {d.device_kind}; jax {jax.__version__}; batch {cluster_epoch_mgpu.BATCH}, "
        f"{cluster_epoch_mgpu.INPUTS} inputs, "
        f"lr {FLAGS.lr:g}; launches of {FLAGS.steps} and {SHORT} steps, median of "
        f"{FLAGS.repeats}")
  print(f"{'network':>12s} {'CTAs':>4s} {'us/step':>8s} {'loss err':>9s} {'weight err':>10s} "
        f"{'compile s':>9s} {'loss 100':>9s} {'float64':>9s}")
  for h in hidden:
    us, loss_err, w_err, compile_s, loss, want = check_and_time(h)
    n_ctas = 2 * h // cluster_epoch_mgpu.UNITS
    print(f"{f'32-{h}-1':>12s} {n_ctas:4d} {us:8.3f} {loss_err:9.1e} {w_err:10.1e} "
          f"{compile_s:9.2f} {loss:9.5f} {want:9.5f}", flush=True)
  if FLAGS.profile:
    steps = 8  # The profiler's buffer shares shared memory with the kernel's.
    for h in hidden:
      import jax.numpy as jnp
      args = [jnp.asarray(a) for a in problem(h, 1, steps)]
      fn = train(FLAGS.lr, profile_dir=FLAGS.profile_dir)
      os.makedirs(FLAGS.profile_dir, exist_ok=True)
      jax.block_until_ready(fn(*args))
      jax.block_until_ready(fn(*args))  # The second run's trace.
      times = phase_times(FLAGS.profile_dir)
      ctas = sorted({cta for cta, _ in times})
      print(f"32-{h}-1, {steps} steps under the profiler: median us a step, CTA by CTA "
            "(the profiler's own cost included)")
      for name in cluster_epoch_mgpu.PHASES:
        print(f"  {name:16s}" + "".join(f"{times.get((c, name), float('nan')):8.3f}"
                                        for c in ctas))
      phases = cluster_epoch_mgpu.PHASES
      print(f"  {'sum':16s}" + "".join(
          f"{sum(times.get((c, n), 0.0) for n in phases):8.3f}" for c in ctas), flush=True)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
