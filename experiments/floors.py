"""The floors under a training step on this device: what an iteration of a compiled loop and a
kernel launch inside it cost, measured the way the trainers run (one ``lax.scan`` per epoch).

  python -m experiments.floors

Prints microseconds per iteration for a scan of 937 iterations (one MNIST epoch at batch 64) whose
body is empty, does one tiny XLA op, or chains 1, 2, 4 or 8 trivial Pallas kernels; and, for
comparison, the reference MLP step of each impl. Median of 20 runs after a warm-up.
"""

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags, logging
from jax import lax
from jax.experimental import pallas as pl

from jaxshallow import mlp, train
from pallas_kernels import common

_STEPS = flags.DEFINE_integer("steps", 937, "Iterations per scan (an epoch of MNIST at 64).")
_REPEATS = flags.DEFINE_integer("repeats", 20, "Timed runs (median).")


def _add_one_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1.0


def tiny_kernel(x, interpret):
  return pl.pallas_call(_add_one_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)(x)


def time_us_per_step(fn, *args, steps):
  jax.block_until_ready(fn(*args))  # Compile and warm up.
  times = []
  for _ in range(_REPEATS.value):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t0)
  return 1e6 * statistics.median(times) / steps


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  interpret, steps = common.interpret_default(), _STEPS.value
  x = jnp.zeros((16,), jnp.float32)
  rows = []

  def scan_of(body):
    return jax.jit(lambda x: lax.scan(lambda c, _: (body(c), None), x, None, length=steps)[0])

  rows.append(("scan, empty body", time_us_per_step(scan_of(lambda c: c), x, steps=steps)))
  rows.append(("scan, one tiny XLA op", time_us_per_step(scan_of(lambda c: c * 1.0001 + 1),
                                                         x, steps=steps)))
  for k in (1, 2, 4, 8):
    def body(c, k=k):
      for _ in range(k):
        c = tiny_kernel(c, interpret)
      return c
    rows.append((f"scan, {k} tiny Pallas kernel(s)", time_us_per_step(scan_of(body), x,
                                                                        steps=steps)))
  rng = np.random.default_rng(0)
  images = jnp.asarray(rng.integers(0, 256, (60000, 28, 28), dtype=np.uint8))
  labels = jnp.asarray(rng.integers(0, 10, 60000, dtype=np.uint8))
  order = jnp.asarray(np.random.default_rng(0).permutation(60000).astype(np.int32))
  tx = train.make_optimizer("sgd", 0.5)
  for impl in ("xla", "pallas"):
    params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
    fn = jax.jit(lambda p, s, impl=impl: train.train_epoch_no_donate(
        p, s, images, labels, order, tx=tx, batch_size=64, impl=impl)[2]["loss"])
    rows.append((f"MLP 784-256-10 step, {impl}",
                 time_us_per_step(fn, params, tx.init(params), steps=60000 // 64)))
  d = jax.devices()[0]
  print(f"device {d.platform}: {d.device_kind}; jax {jax.__version__}")
  for name, us in rows:
    print(f"{name:40s} {us:8.2f} us per iteration")


if __name__ == "__main__":
  app.run(main)
