"""The regression net trained in one thread-block cluster (Pallas Mosaic GPU, Hopper): a first
version of the design in docs/PERFORMANCE.md ("Mosaic GPU clusters"), checked against float64
and timed per step.

  python -m experiments.cluster_regression                  # 32-256-1: 4 CTAs
  python -m experiments.cluster_regression --hidden=128,1024 --profile

The network is the study's 32 -> H (ReLU) -> 1, no biases, mean squared error, plain SGD, batch
256. One launch runs ``--steps`` steps in one cluster of C = H / 64 CTAs; CTA c owns hidden units
64c .. 64c + 63 (its rows of W0^T and entries of w1, kept in registers for the whole launch).
A step, for each CTA:

  forward   z^T = W0^T[units] x^T, a (64, 256) wgmma product; its partial outputs
            sum over its units of relu(z) * w1, stored in its shared memory
  exchange  a cluster barrier; every CTA reads all C partial vectors (distributed shared
            memory) and adds them in CTA order, so all hold the same bits of the outputs,
            the residuals and dL/dout = 2 (out - y) / 256
  backward  dw1 = relu(z) dL/dout; g = w1 dL/dout [z > 0]; dW0^T = g x, a (64, 32) wgmma
            product over the batch; the update in registers

Products run on the tensor cores as 3xTF32 (a = hi + lo with hi exact in TF32; a b ~ hi hi +
hi lo + lo hi), which keeps float32's accuracy. TF32 wgmma takes both operands K-major, so the
batch comes twice: as x (256, 32) for the forward and as x^T (32, 256) for dW0; both, split into
hi and lo, are made by XLA before the launch and brought in by TMA a step ahead. CTA 0 writes
each step's outputs; the losses are their squared errors' means, taken after the launch.

It reports the largest differences from a float64 NumPy run of the same steps and the cost of a
step (launches of ``--steps`` and of 100 steps, median of ``--repeats`` each, so the launch drops
out); ``--profile`` adds Mosaic GPU's per-phase timings (traces under --profile_dir).
"""

import collections
import functools
import glob
import json
import os
import statistics
import sys
import time

import numpy as np
from absl import app, flags, logging

from experiments import hopper
from jaxshallow import numpy_ref, synthetic

FLAGS = flags.FLAGS


def define_flags():
  """Defined when run as a script only, so tests can import the module beside other scripts."""
  flags.DEFINE_list("hidden", ["256"], "Hidden widths, multiples of 64 up to 1024.")
  flags.DEFINE_integer("steps", 1_000, "Steps of the long launch (the short has 100).")
  flags.DEFINE_integer("repeats", 15, "Timed launches of each (median).")
  flags.DEFINE_float("lr", 0.002, "SGD learning rate (the study's).")
  flags.DEFINE_bool("profile", False, "Also time each phase with Mosaic GPU's profiler.")
  flags.DEFINE_string("profile_dir", "/tmp/cluster_regression",
                      "Where the profiler writes its traces.")


BATCH, INPUTS, UNITS = 256, 32, 64  # UNITS: hidden units a CTA, the wgmma's M.
SHORT = 100
# Mosaic GPU's cross-warp reductions use this much shared memory (its default is 2 KB);
# more lets more of a reduction's rounds share one pair of barriers.
REDUCTION_SCRATCH = 8192
PHASES = ("split_w", "wait_x", "forward", "partials", "cluster_barrier", "read_peers",
          "wait_xt", "backward", "update")


def train(hidden: int, steps: int, lr: float, profile_dir: str | None = None):
  """A jitted function (w0 (32, H), w1 (H,), xs (S, 256, 32), ys (S, 256)) -> (w0, w1, losses)
  that runs ``steps`` SGD steps in one kernel launch."""
  import jax
  import jax.numpy as jnp
  from jax import lax
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  from pallas_kernels.hopper_dense import split_tf32 as split

  ctas, half = hidden // UNITS, BATCH // 2
  f32 = jnp.float32
  by_unit = plgpu.Layout.WGMMA.reduce(1)  # (64,): one value a unit (a row of z^T)
  by_row = plgpu.Layout.WGMMA.reduce(0)  # (256,): one value a batch row (a column of z^T)
  tiled = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(128))

  def kernel(w0t_in, w1_in, xh_in, xl_in, xth_in, xtl_in, y_in,  # inputs (global memory)
             w0t_out, w1_out, out_out,  # outputs
             xh, xl, xth, xtl, wh, wl, gh, gl, y, w1_buf, part0, part1, outs, dout, tma, peers):
    cta = lax.axis_index("cta")
    units = pl.ds(cta * UNITS, UNITS)

    def fetch_x(s):  # The forward's operands of step s.
      plgpu.copy_gmem_to_smem(xh_in.at[s], xh, tma.at[0])
      plgpu.copy_gmem_to_smem(xl_in.at[s], xl, tma.at[1])

    def fetch_xt(s):  # The backward's.
      plgpu.copy_gmem_to_smem(xth_in.at[s], xth, tma.at[2])
      plgpu.copy_gmem_to_smem(xtl_in.at[s], xtl, tma.at[3])
      plgpu.copy_gmem_to_smem(y_in.at[s], y, tma.at[4])

    plgpu.copy_gmem_to_smem(w0t_in.at[units], wh, tma.at[5])
    plgpu.copy_gmem_to_smem(w1_in.at[units], w1_buf, tma.at[6])
    plgpu.barrier_wait(tma.at[5])
    plgpu.barrier_wait(tma.at[6])
    w0t, w1 = wh[...], plgpu.load(w1_buf, layout=by_unit, optimized=False)
    fetch_x(0)
    fetch_xt(0)

    def step(s, parity, part, carry):
      w0t, w1 = carry
      with jax.named_scope("split_w"):
        wh[...], wl[...] = split(w0t)
        plgpu.commit_smem()  # Visible to the tensor cores.
      with jax.named_scope("wait_x"):
        plgpu.barrier_wait(tma.at[0])
        plgpu.barrier_wait(tma.at[1])

      def forward(acc):
        plgpu.wgmma(acc, wh, xh.transpose((1, 0)))
        plgpu.wgmma(acc, wh, xl.transpose((1, 0)))
        plgpu.wgmma(acc, wl, xh.transpose((1, 0)))
        plgpu.wgmma_wait(0)
        return acc[...]
      with jax.named_scope("forward"):
        z = pl.run_scoped(forward, plgpu.ACC((UNITS, BATCH), f32))  # z^T

      @pl.when(s + 1 < steps)
      def _():
        fetch_x(s + 1)

      with jax.named_scope("partials"):
        for h in range(2):  # Column halves hold fewer registers than the whole (64, 256).
          cols = slice(h * half, (h + 1) * half)
          units_out = jnp.maximum(z[:, cols], 0.0) * lax.broadcast_in_dim(w1, (UNITS, half), [0])
          part[cols] = jnp.sum(units_out, axis=0)
      with jax.named_scope("cluster_barrier"):
        plgpu.barrier_arrive(peers.at[parity])
        plgpu.barrier_wait(peers.at[parity])
      with jax.named_scope("read_peers"):
        out = plgpu.cluster_ref(part, {"cta": 0})[...]
        for peer in range(1, ctas):  # A fixed order: every CTA gets the same bits.
          out = out + plgpu.cluster_ref(part, {"cta": peer})[...]
        plgpu.barrier_wait(tma.at[4])
        dout[...] = (out - y[...]) * (2.0 / BATCH)

        @pl.when(cta == 0)
        def _():
          plgpu.wait_smem_to_gmem(1, wait_read_only=True)  # This buffer's copy of 2 steps ago.
          outs.at[parity][...] = out
          plgpu.commit_smem()
          plgpu.copy_smem_to_gmem(outs.at[parity], out_out.at[s])
        g_out = plgpu.load(dout, layout=by_row, optimized=False)
      with jax.named_scope("wait_xt"):
        plgpu.barrier_wait(tma.at[2])
        plgpu.barrier_wait(tma.at[3])

      def backward(acc):
        dw1 = None
        for h in range(2):  # In halves: (64, 128) hi and lo buffers fit beside the batch.
          cols = slice(h * half, (h + 1) * half)
          zh = z[:, cols]
          g_out_h = lax.broadcast_in_dim(g_out[cols], (UNITS, half), [1])
          part_dw1 = jnp.sum(jnp.maximum(zh, 0.0) * g_out_h, axis=1)
          dw1 = part_dw1 if dw1 is None else dw1 + part_dw1
          g = jnp.where(zh > 0.0, lax.broadcast_in_dim(w1, (UNITS, half), [0]) * g_out_h, 0.0)
          gh[...], gl[...] = split(g)
          plgpu.commit_smem()
          xt_hi = xth.at[:, pl.ds(h * half, half)].transpose((1, 0))
          xt_lo = xtl.at[:, pl.ds(h * half, half)].transpose((1, 0))
          plgpu.wgmma(acc, gh, xt_hi)
          plgpu.wgmma(acc, gh, xt_lo)
          plgpu.wgmma(acc, gl, xt_hi)
          plgpu.wgmma_wait(0)  # Before the next half overwrites gh and gl.
        return acc[...], dw1
      with jax.named_scope("backward"):
        dw0t, dw1 = pl.run_scoped(backward, plgpu.ACC((UNITS, INPUTS), f32))

      @pl.when(s + 1 < steps)
      def _():
        fetch_xt(s + 1)

      with jax.named_scope("update"):
        return w0t - lr * dw0t, w1 - lr * dw1

    def two_steps(i, carry):  # The partials alternate buffers, so one barrier a step suffices.
      carry = step(2 * i, 0, part0, carry)
      return step(2 * i + 1, 1, part1, carry)

    w0t, w1 = lax.fori_loop(0, steps // 2, two_steps, (w0t, w1))
    plgpu.barrier_arrive(peers.at[0])  # No CTA leaves while a peer may still read its partials.
    plgpu.barrier_wait(peers.at[0])
    wh[...] = w0t
    w1_buf[...] = w1
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(wh, w0t_out.at[units])
    plgpu.copy_smem_to_gmem(w1_buf, w1_out.at[units])
    plgpu.wait_smem_to_gmem(0)

  params = dict(reduction_scratch_bytes=REDUCTION_SCRATCH)
  if profile_dir:
    params.update(profile_space=len(PHASES) * 3 * steps, profile_dir=profile_dir)
  smem = functools.partial(plgpu.SMEM, dtype=f32)
  call = plgpu.kernel(
      kernel,
      out_type=(jax.ShapeDtypeStruct((hidden, INPUTS), f32), jax.ShapeDtypeStruct((hidden,), f32),
                jax.ShapeDtypeStruct((steps, BATCH), f32)),
      grid=(1,), grid_names=("grid",), cluster=(ctas,), cluster_names=("cta",),
      compiler_params=plgpu.CompilerParams(**params),
      scratch_types=[
          smem((BATCH, INPUTS), transforms=tiled), smem((BATCH, INPUTS), transforms=tiled),
          smem((INPUTS, BATCH), transforms=tiled), smem((INPUTS, BATCH), transforms=tiled),
          smem((UNITS, INPUTS), transforms=tiled), smem((UNITS, INPUTS), transforms=tiled),
          smem((UNITS, half), transforms=tiled), smem((UNITS, half), transforms=tiled),
          smem((BATCH,)), smem((UNITS,)), smem((BATCH,)), smem((BATCH,)), smem((2, BATCH)),
          smem((BATCH,)),
          plgpu.Barrier(num_barriers=7),
          plgpu.ClusterBarrier(collective_axes=("cta",), num_barriers=2),
      ])

  @jax.jit
  def run(w0, w1, xs, ys):
    xh, xl = split(xs)
    xth, xtl = jnp.swapaxes(xh, 1, 2), jnp.swapaxes(xl, 1, 2)
    w0t, w1, outs = call(w0.T, w1, xh, xl, xth, xtl, ys)
    return w0t.T, w1, jnp.mean(jnp.square(outs - ys), axis=1)
  return run


def reference(w0, w1, xs, ys, lr: float):
  """The same steps in float64 with the project's NumPy reference: (w0, w1, losses)."""
  params = [{"w": np.float64(w0)}, {"w": np.float64(w1)[:, None]}]
  _, sgd = numpy_ref.sgd(lr)
  losses = []
  for x, y in zip(np.float64(xs), np.float64(ys)):
    loss, grads, _ = numpy_ref.loss_and_grads(params, x, y, loss="mse")
    params, _ = sgd(grads, (), params)
    losses.append(loss)
  return params[0]["w"], params[1]["w"][:, 0], np.array(losses)


def problem(hidden: int, seed: int, steps: int):
  """``steps`` batches of the study's data (``synthetic.make_regression``) and He-initialised
  weights (``numpy_ref.init_mlp``, biases left out)."""
  rng = np.random.default_rng(seed)
  x, y = synthetic.make_regression(steps * BATCH, rng, INPUTS)
  w0, w1 = (layer["w"] for layer in numpy_ref.init_mlp(rng, (INPUTS, hidden, 1)))
  return w0, w1[:, 0], x.reshape(steps, BATCH, INPUTS), y.reshape(steps, BATCH)


def phase_times(trace_dir: str) -> dict:
  """Median microseconds of each phase over the steps, CTA by CTA, from the newest trace."""
  newest = max(glob.glob(os.path.join(trace_dir, "*trace.json")), key=os.path.getmtime)
  opened, spans = collections.defaultdict(list), collections.defaultdict(list)
  for e in json.load(open(newest))["traceEvents"]:  # Times in us; one "tid" a CTA.
    key = (e["tid"], e["name"])
    if e["ph"] == "B":
      opened[key].append(e["ts"])
    else:
      spans[key].append(e["ts"] - opened[key].pop())
  return {key: statistics.median(v) for key, v in spans.items()}


def check_and_time(hidden: int):
  import jax
  import jax.numpy as jnp
  w0, w1, xs, ys = problem(hidden, 0, SHORT)
  t0 = time.perf_counter()
  got = [np.asarray(v) for v in jax.block_until_ready(train(hidden, SHORT, FLAGS.lr)(
      w0, w1, xs, ys))]
  compile_s = time.perf_counter() - t0
  want = reference(w0, w1, xs, ys, FLAGS.lr)
  loss_err = float(np.max(np.abs(got[2] - want[2]) / want[2]))
  w_err = max(float(np.max(np.abs(g - w) / np.max(np.abs(w)))) for g, w in zip(got, want[:2]))
  seconds = {}
  for steps in (SHORT, FLAGS.steps):
    args = [jnp.asarray(a) for a in problem(hidden, 1, steps)]
    fn = train(hidden, steps, FLAGS.lr)
    seconds[steps] = hopper.median_seconds(lambda: fn(*args), FLAGS.repeats)
  us = 1e6 * (seconds[FLAGS.steps] - seconds[SHORT]) / (FLAGS.steps - SHORT)
  return us, loss_err, w_err, compile_s, got[2][-1], want[2][-1]


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  import jax
  d = hopper.require_hopper("cluster_regression")
  hidden = [int(h) for h in FLAGS.hidden]
  bad = [h for h in hidden if h % UNITS or not UNITS <= h <= 16 * UNITS]
  if bad:
    sys.exit(f"error: --hidden must be multiples of {UNITS} from {UNITS} to {16 * UNITS} "
             f"(one CTA a {UNITS} units, at most 16 in a cluster), got {bad}")
  if FLAGS.steps <= SHORT or FLAGS.steps % 2:
    sys.exit(f"error: --steps must be an even number above {SHORT}, got {FLAGS.steps}")
  print(f"device {d.device_kind}; jax {jax.__version__}; batch {BATCH}, {INPUTS} inputs, "
        f"lr {FLAGS.lr:g}; launches of {FLAGS.steps} and {SHORT} steps, median of "
        f"{FLAGS.repeats}")
  print(f"{'network':>12s} {'CTAs':>4s} {'us/step':>8s} {'loss err':>9s} {'weight err':>10s} "
        f"{'compile s':>9s} {'loss 100':>9s} {'float64':>9s}")
  for h in hidden:
    us, loss_err, w_err, compile_s, loss, want = check_and_time(h)
    print(f"{f'32-{h}-1':>12s} {h // UNITS:4d} {us:8.3f} {loss_err:9.1e} {w_err:10.1e} "
          f"{compile_s:9.2f} {loss:9.5f} {want:9.5f}", flush=True)
  if FLAGS.profile:
    steps = 8  # The profiler's buffer shares shared memory with the kernel's.
    for h in hidden:
      import jax.numpy as jnp
      args = [jnp.asarray(a) for a in problem(h, 1, steps)]
      fn = train(h, steps, FLAGS.lr, profile_dir=FLAGS.profile_dir)
      os.makedirs(FLAGS.profile_dir, exist_ok=True)
      jax.block_until_ready(fn(*args))
      jax.block_until_ready(fn(*args))  # The second run's trace.
      times = phase_times(FLAGS.profile_dir)
      ctas = sorted({cta for cta, _ in times})
      print(f"32-{h}-1, {steps} steps under the profiler: median us a step, CTA by CTA "
            "(the profiler's own cost included)")
      for name in PHASES:
        print(f"  {name:16s}" + "".join(f"{times.get((c, name), float('nan')):8.3f}"
                                        for c in ctas))
      print(f"  {'sum':16s}" + "".join(
          f"{sum(times.get((c, n), 0.0) for n in PHASES):8.3f}" for c in ctas), flush=True)


if __name__ == "__main__":
  define_flags()
  app.run(main)
