"""Checks and times ``tile_mlp_mgpu`` (MLP 784-256-1024-256-10 on resident weight tiles) on a
Hopper GPU: the kernel against its jnp twin in float32 and float64 (random pixels and labels),
the same bits twice, then us a step beside an XLA scan of the same steps (float32 products,
HIGHEST).

  python -m probes.tile_mlp              # checks and times
  python -m probes.tile_mlp --profile    # each scope's time a step, by CTA role
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from jax import lax

from jaxshallow import mlp
from jaxshallow.run import cli
from pallas_kernels.fused import tile_mlp_mgpu as m
from probes import hopper

FLAGS = flags.FLAGS
flags.DEFINE_bool("profile", False, "Time each scope with Mosaic GPU's profiler instead.")
flags.DEFINE_integer("repeats", 5, "Timed launches of each (median).")
flags.DEFINE_string("profile_dir", "/tmp/tile_mlp", "Where the profiler writes traces.")


def xla_steps(params, xs, onehot, lr):
  hi = lax.Precision.HIGHEST

  def loss_fn(p, x, oh):
    h = x.astype(jnp.float32) * (1.0 / 255.0)  # As train.to_float.
    for i, l in enumerate(p):
      h = jnp.dot(h, l["w"], precision=hi) + l["b"]
      if i < 3:
        h = jnp.maximum(h, 0)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h) * oh[:, :10], axis=1))

  def step(p, xy):
    l, g = jax.value_and_grad(loss_fn)(p, *xy)
    return jax.tree.map(lambda a, b: a - lr * b, p, g), l
  return lax.scan(step, params, (xs[:, :, :784], onehot))


def median(fn, n):
  fn()
  ts = []
  for _ in range(n):
    t = time.perf_counter()
    jax.block_until_ready(fn())
    ts.append(time.perf_counter() - t)
  return float(np.median(ts))


def main(argv):
  del argv
  cli.at_least("--repeats", FLAGS.repeats, 1)
  if FLAGS.profile:
    return profile(FLAGS.profile_dir)
  print(jax.__version__, jax.devices()[0].device_kind)
  rng = np.random.default_rng(0)
  lr = 0.1
  for steps, seed in ((3, 0), (20, 1)):
    n = steps * 64 + 7
    x = jnp.asarray(rng.integers(0, 256, (n, 784)).astype(np.uint8))
    y = jnp.asarray(rng.integers(0, 10, n))
    order = jnp.asarray(rng.permutation(n).astype(np.int32))
    params = mlp.init_mlp(jax.random.key(seed), m.WIDTHS)
    xs, oh = m.batches(x, y, order, steps)
    run = jax.jit(lambda p, a, b: m.train_steps(p, a, b, lr))
    t = time.perf_counter()
    got, losses, correct = jax.block_until_ready(run(params, xs, oh))
    print(f"steps {steps}: first call {time.perf_counter() - t:.1f} s")
    again = run(params, xs, oh)
    same = all(bool(jnp.array_equal(a, b)) for a, b in
               zip(jax.tree.leaves((got, losses)), jax.tree.leaves((again[0], again[1]))))
    twin, tl, tc = jax.jit(lambda p, a, b: m.reference(p, a, b, lr))(params, xs, oh)
    with jax.enable_x64(True):
      p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
      w64, l64, c64 = m.reference(p64, xs, jnp.asarray(np.asarray(oh), jnp.float64), lr)
      l64 = np.asarray(l64)
      w64 = [np.asarray(a) for a in jax.tree.leaves(w64)]
    _, xl = jax.jit(lambda p, a, b: xla_steps(p, a, b, lr))(params, xs, oh)
    rel = lambda a: float(np.max(np.abs(np.asarray(a) - l64) / np.abs(l64)))
    wrel = lambda ps: max(float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))
                          for a, b in zip(jax.tree.leaves(ps), w64))
    print(f"  losses: kernel {np.asarray(losses)[:3]} ... last {float(losses[-1]):.7f}; float64 last "
          f"{l64[-1]:.7f}")
    print(f"  loss distance from float64 (largest relative): kernel {rel(losses):.2e}, twin f32 "
          f"{rel(tl):.2e}, xla {rel(xl):.2e}")
    print(f"  weights' distance from float64 (largest over max): kernel {wrel(got):.2e}, twin f32 "
          f"{wrel(twin):.2e}")
    print(f"  correct: kernel {np.asarray(correct)[:5]} twin {np.asarray(tc)[:5]}; same bits twice: "
          f"{same}")
  # Timing: 937 steps (an MNIST epoch) against 100, and the XLA scan.
  for steps in (100, 937):
    n = steps * 64
    x = jnp.asarray(rng.integers(0, 256, (n, 784)).astype(np.uint8))
    y = jnp.asarray(rng.integers(0, 10, n))
    order = jnp.arange(n, dtype=jnp.int32)
    params = mlp.init_mlp(jax.random.key(0), m.WIDTHS)
    xs, oh = m.batches(x, y, order, steps)
    run = jax.jit(lambda p, a, b: m.train_steps(p, a, b, lr))
    xr = jax.jit(lambda p, a, b: xla_steps(p, a, b, lr))
    tk = median(lambda: run(params, xs, oh), FLAGS.repeats)
    tx = median(lambda: xr(params, xs, oh), FLAGS.repeats)
    print(f"{steps} steps: kernel {tk * 1e3:.2f} ms ({tk / steps * 1e6:.1f} us a step), xla scan "
          f"{tx * 1e3:.2f} ms ({tx / steps * 1e6:.1f} us a step): {tx / tk:.2f}x")


def profile(trace_dir):
  """Each scope's time a step under Mosaic GPU's profiler, summed over a step, the median over
  the CTAs that run it (the profiler's own cost included)."""
  import os
  import statistics
  os.makedirs(trace_dir, exist_ok=True)
  rng = np.random.default_rng(3)
  steps = 4
  n = steps * 64
  x = jnp.asarray(rng.integers(0, 256, (n, 784)).astype(np.uint8))
  y = jnp.asarray(rng.integers(0, 10, n))
  params = mlp.init_mlp(jax.random.key(0), m.WIDTHS)
  xs, oh = m.batches(x, y, jnp.arange(n, dtype=jnp.int32), steps)
  run = jax.jit(lambda p, a, b: m.train_steps(p, a, b, 0.1, profile_dir=trace_dir))
  jax.block_until_ready(run(params, xs, oh))
  jax.block_until_ready(run(params, xs, oh))
  spans, first, last = hopper.trace_spans(trace_dir)
  spent = {key: sum(v) for key, v in spans.items()}
  ctas = sorted(first)
  print(f"profile of {steps} steps, {len(ctas)} CTAs: us a step, median (largest) over CTAs")
  roles = {"W1": range(0, 64), "W2 and W0": range(64, 116), "W2": range(116, 128),
           "W3": range(128, 132)}
  for name in m.PHASES:
    cols = []
    for role, cs in roles.items():
      v = [spent[(c, name)] / steps for c in ctas if c in cs and (c, name) in spent]
      cols.append(f"{role} {statistics.median(v):6.2f}" if v else f"{role} -")
    print(f"  {name:10s} " + ", ".join(cols))
  median, largest = hopper.traced_span(first, last, steps)
  print(f"  {'traced':10s} {median:7.2f} ({largest:7.2f})")


if __name__ == "__main__":
  cli.run(main)
