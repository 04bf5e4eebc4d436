"""The floors under a training step on this device: what an iteration of a compiled loop and a
kernel launch inside it cost, measured the way the trainers run (one ``lax.scan`` per epoch).

  python -m benchmarks.floors

Prints microseconds per iteration for a scan of 937 iterations (one MNIST epoch at batch 64) whose
body is empty, does one tiny XLA op, or chains 1, 2, 4 or 8 trivial Pallas kernels; then the
reference MLP step with xla and with each stage of the Pallas path (the first version: unfused
output layer, 64x64x32 blocks; then 32x32x32 blocks; then the fused output layer; then 16x16x128
blocks for the hidden layer, the default); then the hidden layer alone (dense 784->256 + ReLU,
forward and backward) with W stored as (K, N) and pre-transposed as (N, K), at batch 64 (with
four block sizes), 1024 and 8192. Median of 20 runs after a warm-up.
"""

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from jax import lax
from jax.experimental import pallas as pl

import optax

from jaxshallow import mlp, models, ops as ops_lib, train
from jaxshallow.ops import pallas_ops
from jaxshallow.run import cli
from pallas_kernels import common
from pallas_kernels.ops import dense, dense_xent

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


def layout_rows(interpret, steps=200):
  """The hidden layer's forward and backward, W as (K, N) and as (N, K), in a scan whose
  iterations depend on each other through W (a tiny SGD step), as in training. At batch 64
  also with other blocks, in case the pre-transposed layout wants different ones."""
  rows = []
  cases = [(64, blocks) for blocks in (None, "16,16,16", "64,64,32", "32,32,64")]
  cases += [(1024, None), (8192, None)]
  for m, blocks in cases:
    x = jax.random.uniform(jax.random.key(1), (m, 784))
    for w_t in (False, True):
      shape = (256, 784) if w_t else (784, 256)
      w = jax.random.normal(jax.random.key(2), shape) * 0.05
      b = jnp.zeros((256,))

      def body(wb, _, w_t=w_t, blocks=ops_lib.parse_blocks(blocks)):
        y, vjp = jax.vjp(lambda w, b: dense.dense(x, w, b, relu=True, blocks=blocks,
                                                  interpret=interpret, w_transposed=w_t), *wb)
        dw, db = vjp(y)
        return (wb[0] - 1e-6 * dw, wb[1] - 1e-6 * db), None

      fn = jax.jit(lambda w, b, body=body: lax.scan(body, (w, b), None, length=steps)[0])
      layout = "(N, K) pre-transposed" if w_t else "(K, N)"
      name = f"blocks {blocks.replace(',', 'x')}" if blocks else "default blocks"
      rows.append((f"dense 784->256 fwd+bwd, batch {m}, {name}, W {layout}",
                   time_us_per_step(fn, w, b, steps=steps)))
  return rows


def main(argv):
  del argv
  cli.at_least("steps", _STEPS.value, 1)
  cli.at_least("repeats", _REPEATS.value, 1)
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

  def unfused(o):  # The output layer as two ops, five kernels (the first Pallas version).
    return o._replace(dense_softmax_cross_entropy=lambda h, w, b, y: o.softmax_cross_entropy(
        o.dense(h, w, b), y))

  variants = [("xla", ops_lib.get_ops("xla")),
              ("pallas, unfused head, blocks 64x64x32",
               unfused(pallas_ops(blocks="64,64,32", interpret=interpret))),
              ("pallas, unfused head, blocks 32x32x32",
               unfused(pallas_ops(blocks="32,32,32", interpret=interpret))),
              ("pallas, fused head, hidden blocks 32x32x32",
               pallas_ops(blocks="32,32,32", interpret=interpret)),
              ("pallas, fused head, hidden blocks 16x16x128 (default)",
               pallas_ops(interpret=interpret))]

  def fused(bm, bk):  # The fused output layer with other blocks (default hidden blocks).
    blocks = (("block_m", bm), ("block_k", bk))
    return pallas_ops(interpret=interpret)._replace(
        dense_softmax_cross_entropy=lambda h, w, b, y: dense_xent.dense_softmax_cross_entropy(
            h, w, b, y, blocks=blocks, interpret=interpret))

  variants += [(f"pallas, fused head, blocks {bm}x{bk}", fused(bm, bk))
               for bm, bk in [(64, 128), (32, 64), (16, 32)]]
  batches = order[:937 * 64].reshape(937, 64)
  for name, ops in variants:
    def epoch(p, s, ops=ops):  # train_epoch's scan, with these ops.
      def body(carry, idx):
        p, s = carry
        (loss, _), g = jax.value_and_grad(train.loss_fn, has_aux=True)(
            p, train.to_float(images[idx]), labels[idx], ops=ops, model=models.MLP)
        u, s = tx.update(g, s, p)
        return (optax.apply_updates(p, u), s), loss
      return lax.scan(body, (p, s), batches)[1].mean()
    params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
    rows.append((f"MLP step, {name}", time_us_per_step(jax.jit(epoch), params,
                                                        tx.init(params), steps=937)))
  rows += layout_rows(interpret)
  d = jax.devices()[0]
  print(f"device {d.platform}: {d.device_kind}; jax {jax.__version__}")
  for name, us in rows:
    print(f"{name:76s} {us:8.2f} us per iteration")


if __name__ == "__main__":
  cli.run(main)
