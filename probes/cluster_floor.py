"""The floor of the MLP reference's one-cluster kernel (``cluster_mlp_mgpu``, 784-256-10, batch
64): its step; its step without the two exchanges between the cluster's CTAs (each CTA's own
partial logits taken as the logits: wrong numbers, the same work otherwise); and the exchanges
alone (``probes.cluster_exchange``'s ``spread`` form, the kernel's). The exchanges cannot overlap
the rest (their input is the whole forward, and the next forward needs their output), so the
step is at least the second plus the third.

  python -m probes.cluster_floor                       # float32
  python -m probes.cluster_floor --precisions=float32,tf32,bfloat16

On 2026-11-26 (H100, jax 0.11.2) the same measurement gave tf32 5.95 and bfloat16 5.09 us
(docs/design/cluster_kernels.md). Issue #54 asks 4.5x xla on jax 0.12, whose XLA trains the MLP
12 % faster than 0.11.2's: about 6.06 us a step for this kernel at float32. Each cost is the
difference between launches of ``--steps`` and 100 steps over the difference in steps (median of
``--repeats`` each), so the launch drops out.
"""

import numpy as np
from absl import flags

from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from probes import hopper

_PRECISIONS = flags.DEFINE_list("precisions", ["float32"], "float32, tf32 and/or bfloat16.")
_STEPS = flags.DEFINE_integer("steps", 1_100, "Steps of the long launch (the short has 100).")
_REPEATS = flags.DEFINE_integer("repeats", 7, "Timed launches of each (median).")

SHORT = 100


def problem(steps: int, seed: int = 0):
  """Random pixels and labels as the kernel takes them, and a network of 784-256-10."""
  import jax
  import jax.numpy as jnp
  from jaxshallow import mlp
  from pallas_kernels.fused import cluster_mlp_mgpu as k
  rng = np.random.default_rng(seed)
  n = steps * k.BATCH
  x = jnp.asarray(rng.integers(0, 256, (n, k.INPUTS), dtype=np.uint8))
  labels = jnp.asarray(rng.integers(0, k.CLASSES, n))
  xs, onehot = k.batches(x, labels, jnp.arange(n), steps)
  return mlp.init_mlp(jax.random.key(seed), (k.INPUTS, k.HIDDEN, k.CLASSES)), xs, onehot


def main(argv):
  del argv
  import jax
  from pallas_kernels.fused import cluster_mlp_mgpu as k
  from probes.cluster_exchange import mlp_exchanges
  cli.known("--precisions", _PRECISIONS.value, tuple(k.PARTS))
  cli.at_least("repeats", _REPEATS.value, 1)
  if _STEPS.value <= SHORT:
    raise ConfigError(f"--steps must be above {SHORT}, got {_STEPS.value}")
  d = hopper.require_hopper("cluster_floor")
  steps, repeats = _STEPS.value, _REPEATS.value
  data = {n: problem(n) for n in (SHORT, steps)}

  def us(fn):  # fn(n) -> a callable running n steps
    return hopper.us_per_step(fn(SHORT), fn(steps), SHORT, steps, repeats)

  def kernel(precision, exchanges):
    step = jax.jit(lambda p, x, y: k.train_steps(p, x, y, 0.1, precision, exchanges=exchanges))
    return lambda n: (lambda: step(*data[n]))

  alone = us(lambda n: mlp_exchanges(n, "spread"))
  print(f"device {d.device_kind}; jax {jax.__version__}; 784-256-10, batch 64, one cluster of "
        f"{k.CTAS} CTAs; {k.semantics()} semantics", flush=True)
  print(f"the two exchanges alone (spread): {alone:.2f} us a step", flush=True)
  for precision in _PRECISIONS.value:
    full, rest = us(kernel(precision, True)), us(kernel(precision, False))
    print(f"{precision:9s} the kernel {full:.2f} us a step; without its exchanges {rest:.2f}; "
          f"floor (without + alone) {rest + alone:.2f}", flush=True)


if __name__ == "__main__":
  cli.run(main)
