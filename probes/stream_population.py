"""Checks and times ``stream_population_mgpu`` (a population of MLPs 784-256-10, their weights
streamed from global memory every step) on a Hopper GPU: each member against the kernel's jnp
twin in float32 (random pixels and labels, the members' own learning rates and batches), the
same bits twice, then us a step beside the twin under XLA (a vmapped scan of the same steps,
float32 products at HIGHEST), for each population size.

  python -m probes.stream_population                     # 8, 64 and 128 members
  python -m probes.stream_population --shared            # the members on one set of batches
  python -m probes.stream_population --profile --members=8,64  # where a step's time goes
  python -m probes.stream_population --floor --members=8,64    # the walks alone, the outputs alone
  python -m probes.stream_population --forms=base,ahead --members=64,512  # forms side by side

``--forms`` times the kernel's forms (``FORMS``) in alternating rounds in one process, each
checked against the twin as above and against the first form's bits.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from jaxshallow import mlp
from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from pallas_kernels.fused import stream_population_mgpu as k
from probes import hopper

FLAGS = flags.FLAGS


def define_flags():  # (at run time only: tests import this module beside other scripts' flags)
  flags.DEFINE_list("members", ["8", "64", "128"], "Population sizes.")
  flags.DEFINE_bool("shared", False, "Every member on the same batches (else each its own).")
  flags.DEFINE_bool("profile", False, "Time each scope of a step with Mosaic GPU's profiler "
                    "instead (1 step, 2 walks; the profiler's own cost included).")
  flags.DEFINE_bool("floor", False, "Also time the kernel with only its walks over W0 and with "
                    "only its output layer (wrong numbers: what each costs alone).")
  flags.DEFINE_string("profile_dir", "/tmp/stream_population",
                      "Where the profiler writes traces.")
  flags.DEFINE_integer("repeats", 5, "Timed launches of each (median).")
  flags.DEFINE_list("forms", [], "Forms of the kernel to compare (FORMS' names; empty: the "
                    "module's defaults alone).")
  flags.DEFINE_integer("rounds", 3, "With --forms: rounds of timing, the forms alternating.")

# The kernel's forms: train_steps' arguments (the module's constants say which is the default)
FORMS = {"base": dict(ahead=False, reverse_odd=False), "ahead": dict(ahead="store"),
         "ahead_start": dict(ahead="start"), "reversed": dict(reverse_odd=True),
         "ahead_reversed": dict(ahead="store", reverse_odd=True)}

SHORT, LONG = 10, 110
CHECK_STEPS = 20


def problem(members: int, steps: int, shared: bool, seed: int = 0):
  """Random pixels and labels, each member's order (or one), He-initialised members, their
  learning rates 0.05 .. 0.2: (params, lrs, xs, onehot) as ``train_steps`` takes them."""
  rng = np.random.default_rng(seed)
  n = steps * k.BATCH
  x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8))
  y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
  orders = jnp.asarray(np.stack([rng.permutation(n) for _ in range(1 if shared else members)]))
  keys = jax.random.split(jax.random.key(seed), members)
  params = jax.vmap(lambda key: mlp.init_mlp(key, (784, 256, 10)))(keys)
  lrs = jnp.linspace(0.05, 0.2, members, dtype=jnp.float32)
  return (params, lrs, *k.batches(x, y, orders, steps))


def same_bits(a, b) -> bool:
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def check(members: int, shared: bool, fn=k.train_steps):
  """The kernel's losses and weights against the twin's in float32 (the largest relative
  error over the members), whether a second run gives the same bits, and the results."""
  args = problem(members, CHECK_STEPS, shared)
  run = jax.jit(fn)
  got = jax.block_until_ready(run(*args))
  want = jax.jit(k.reference)(*args)
  err = max(float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                  / max(np.linalg.norm(np.asarray(b, np.float64)), 1e-30))
            for a, b in zip(jax.tree.leaves(got[:2]), jax.tree.leaves(want[:2])))
  return err, same_bits(got, run(*args)), got


def compare_forms(members: int, shared: bool, names, rounds: int, us_per_step):
  """Each form checked (against the twin, twice, and against the first form's bits), then
  timed in ``rounds`` rounds, the forms alternating: us a step, the median over rounds."""
  fns = {n: functools.partial(k.train_steps, **FORMS[n]) for n in names}
  first = None
  for n, fn in fns.items():
    err, same, got = check(members, shared, fn)
    if first is None:
      first, alike = got, "the first form"
    else:
      alike = ("the same bits as " if same_bits(got, first) else "other bits than ") + names[0]
    print(f"    {n}: {CHECK_STEPS} steps {err:.1e} from the twin, "
          f"{'the same bits twice' if same else 'NOT the same bits twice'}, {alike}",
          flush=True)
  times = {n: [] for n in names}
  for r in range(rounds):
    for n in (names if r % 2 == 0 else names[::-1]):
      times[n].append(us_per_step(fns[n], members))
    print(f"    round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.2f}" for n in names)
          + " us a step", flush=True)
  print(f"    median of {rounds} rounds: "
        + ", ".join(f"{n} {float(np.median(times[n])):.2f}" for n in names), flush=True)


def main(argv):
  del argv
  sizes = cli.ints("members", FLAGS.members)
  cli.at_least("--repeats", FLAGS.repeats, 1)
  cli.at_least("--rounds", FLAGS.rounds, 1)
  cli.known("--forms", FLAGS.forms, FORMS, empty=True)
  if len(set(FLAGS.forms)) < len(FLAGS.forms):
    raise ConfigError(f"--forms names a form twice: {','.join(FLAGS.forms)}")
  if FLAGS.forms and (FLAGS.profile or FLAGS.floor):
    raise ConfigError("--forms times whole steps: not with --profile or --floor")
  d = hopper.require_hopper("probes.stream_population")
  kind = "one set of batches" if FLAGS.shared else "each member its own batches"
  print(f"{d.device_kind}, jax {jax.__version__}: {kind}")
  if FLAGS.profile:
    for members in sizes:
      profile(members, FLAGS.shared, FLAGS.profile_dir)
    return
  def us_per_step(fn, members):
    launch = [functools.partial(jax.jit(fn), *problem(members, n, FLAGS.shared))
              for n in (SHORT, LONG)]
    return hopper.us_per_step(*launch, SHORT, LONG, FLAGS.repeats)

  for members in sizes:
    if FLAGS.forms:
      print(f"  {members} members: the kernel's forms", flush=True)
      compare_forms(members, FLAGS.shared, FLAGS.forms, FLAGS.rounds, us_per_step)
      continue
    xla = us_per_step(k.reference, members)
    print(f"  {members} members: XLA {xla:.1f} us a step", flush=True)
    err, same, _ = check(members, FLAGS.shared)
    us = us_per_step(k.train_steps, members)
    print(f"    kernel: {CHECK_STEPS} steps {err:.1e} from the twin, "
          f"{'the same bits twice' if same else 'NOT the same bits twice'}; {us:.1f} us a "
          f"step: {xla / us:.2f}x XLA ({members / us * 1e6 / 937:.0f} networks/s at 937 "
          f"steps an epoch)", flush=True)
    for parts in ("walk", "outputs") if FLAGS.floor else ():
      alone = us_per_step(functools.partial(k.train_steps, parts=parts), members)
      print(f"    the {'walks over W0' if parts == 'walk' else 'output layer'} alone: "
            f"{alone:.1f} us a step", flush=True)


SCOPES = ("walk", "prefetch", "tile_wait", "w1_rows", "h_parts", "partial_logits",
          "partial_rows", "exchange", "logits", "softmax", "backward", "dz_parts")
TILE_SCOPES = ("prefetch", "tile_wait")  # A walk's tiles' (12 prefetches, 13 waits)


def profile(members: int, shared: bool, trace_dir: str, steps: int = 1):
  """Each scope's time a step (the median, and the largest, over warpgroups and steps; one
  step: the profiler's buffer takes shared memory, which the kernel leaves little of), a
  step's traced span, and how far apart the warpgroups' first events are (a launch in two
  waves shows as about the whole launch's time apart)."""
  import os
  os.makedirs(trace_dir, exist_ok=True)
  args = problem(members, steps, shared)
  # The profiler's buffer with the fresh descriptors' word is 40 bytes over the H100's shared
  # memory (232,488 of 232,448; jax 0.11.2, 2026-12-07g): the form before it is profiled.
  fn = functools.partial(k.train_steps, profile_dir=trace_dir, fresh_descriptors=False)
  jax.block_until_ready(jax.jit(fn)(*args))
  spans, first, last = hopper.trace_spans(trace_dir)
  print(f"  {members} members, profile of {steps} steps ({steps + 1} walks), {len(first)} "
        f"traced threads, descriptors built before the walk: us, median (largest); a tile's "
        f"scopes also summed over a walk (the median of each thread's walks)")
  for name, median, largest in hopper.scope_times(spans, SCOPES):
    walk = ""
    if name in TILE_SCOPES:
      walk = f"  {hopper.per_walk(spans, name, steps + 1):8.2f} a walk"
    print(f"    {name:14s} {median:8.2f} ({largest:8.2f}){walk}")
  median, largest = hopper.traced_span(first, last, steps + 1)
  starts = sorted(first.values())
  print(f"    {'step':14s} {median:8.2f} ({largest:8.2f}) traced; the threads' first events "
        f"{starts[-1] - starts[0]:.1f} us apart", flush=True)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
