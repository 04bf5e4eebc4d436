"""The MLP's op kernels in Pallas and in Triton, side by side: lines of code, compile time, and
GPU time per call; then a whole training step of each impl, against the time of its kernels.

  python -m benchmarks.kernel_times --batch=64 --precision=float32

GPU time per call is the median duration of the kernel's events in a profiler trace of
``--calls`` calls (``jax.profiler``; CUPTI's kernel timestamps), so it excludes the launch. A
step's time is an epoch's wall time over its steps; beside it, the GPU time of the kernels the
step ran and how many there were: when the step takes much longer than its kernels, it is bound
by launching them. GPU only; the Triton column needs jax-triton.
"""

import glob
import inspect
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags, logging

from jaxshallow import ops
from jaxshallow.run import cli, config, runner, trainers
from pallas_kernels.ops import dense as pallas_dense
from pallas_kernels.ops import softmax_xent as pallas_xent

_BATCH = flags.DEFINE_integer("batch", 64, "Rows of the batch.")
_HIDDEN = flags.DEFINE_integer("hidden", 256, "Width of the MLP's hidden layer.")
_PRECISION = flags.DEFINE_enum("precision", "float32", ops.PRECISIONS, "Products' precision.")
_CALLS = flags.DEFINE_integer("calls", 200, "Calls of each kernel under the profiler.")
_TRITON_BLOCKS = flags.DEFINE_string("triton_blocks", None,
                                     "BM,BN,BK for the Triton dense kernels (default: theirs).")
_OPS = flags.DEFINE_bool("ops", True, "Time each op kernel in Pallas and in Triton.")
_STEPS = flags.DEFINE_bool("steps", True, "Also profile an epoch of each impl's training.")


def code_lines(fn) -> int:
  """Lines of a function's source, less blank lines, comments and its docstring."""
  fn = getattr(fn, "fn", fn)  # A @triton.jit kernel wraps its Python function.
  src = inspect.getsource(fn)
  doc = inspect.getdoc(fn)
  n = sum(1 for line in src.splitlines() if line.strip() and not line.strip().startswith("#"))
  return n - (len(doc.splitlines()) if doc else 0)


def profiled_kernels(run) -> dict[str, list[float]]:
  """{kernel name: durations in us} of the GPU kernels that ``run()`` ran, from a profiler
  trace; ``run`` waits for its results."""
  with tempfile.TemporaryDirectory() as d:
    with jax.profiler.trace(d):
      run()
    path, = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
    profile = jax.profiler.ProfileData.from_file(path)
  times = {}
  for plane in profile.planes:
    if plane.name.startswith("/device:GPU"):
      for line in plane.lines:
        if line.name.startswith("Stream"):
          for e in line.events:
            times.setdefault(e.name, []).append(e.duration_ns / 1e3)
  return times


def gpu_kernels(fn, args, calls: int) -> dict[str, list[float]]:
  """{kernel name: durations in us} of the GPU kernels run by ``calls`` calls of ``fn``."""
  jax.block_until_ready(fn(*args))

  def run():
    for _ in range(calls):
      out = fn(*args)
    jax.block_until_ready(out)

  return profiled_kernels(run)


def compile_seconds(fn, args) -> tuple:
  """(the jitted function, seconds to lower and compile it). jax-triton compiles its Triton
  kernel while lowering; Pallas's goes through XLA's compile."""
  t0 = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  return compiled, time.perf_counter() - t0


def cases(batch: int, hidden: int, precision: str, triton_blocks=None):
  """(name, Pallas call, Triton call, args, Pallas kernel, Triton kernel) at the MLP's shapes."""
  from triton_kernels import dense as triton_dense
  from triton_kernels import softmax_xent as triton_xent
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.random((batch, 784), np.float32))
  w1 = jnp.asarray(rng.normal(0, 0.05, (784, hidden)).astype(np.float32))
  b1 = jnp.asarray(rng.normal(0, 0.05, hidden).astype(np.float32))
  w2 = jnp.asarray(rng.normal(0, 0.05, (hidden, 10)).astype(np.float32))
  h = jax.nn.relu(jnp.asarray(rng.normal(0, 1, (batch, hidden)).astype(np.float32)))
  g = jnp.asarray(rng.normal(0, 1, (batch, hidden)).astype(np.float32))
  z = jnp.asarray(rng.normal(0, 3, (batch, 10)).astype(np.float32))
  labels = jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))
  logsum = jax.nn.logsumexp(z - z.max(1, keepdims=True), axis=1)
  scale = jnp.full((1,), 1.0 / batch, jnp.float32)
  m, p = batch, precision

  def blocks(k, kernel):  # The Pallas op's own choice, its precision included.
    return pallas_dense.kernel_blocks(m, k, p, kernel, None)

  pd, td = pallas_dense, triton_dense
  tb = dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), triton_blocks)) if triton_blocks else None
  return [
      (f"dense forward 784x{hidden}, ReLU",
       lambda x, w, b: pd.dense_fwd(x, w, b, relu=True, **blocks(784, "fwd")),
       lambda x, w, b: td.dense_fwd(x, w, b, relu=True, precision=p, blocks=tb), (x, w1, b1),
       pd.dense_fwd_kernel, td.dense_fwd_kernel),
      (f"dense dW and db 784x{hidden}",
       lambda x, g, y: pd.dense_dw(x, g, y, relu=True, **blocks(784, "dw")),
       lambda x, g, y: td.dense_dw(x, g, y, relu=True, precision=p, blocks=tb), (x, g, h),
       pd.dense_dw_kernel, td.dense_dw_kernel),
      (f"dense forward {hidden}x10",
       lambda h, w: pd.dense_fwd(h, w, None, **blocks(hidden, "fwd")),
       lambda h, w: td.dense_fwd(h, w, None, relu=False, precision=p, blocks=tb), (h, w2),
       pd.dense_fwd_kernel, td.dense_fwd_kernel),
      (f"dense dx {hidden}x10",
       lambda dz, w: pd.dense_dx(dz, None, w, **blocks(hidden, "dx")),
       lambda dz, w: td.dense_dx(dz, None, w, relu=False, precision=p, blocks=tb), (z, w2),
       pd.dense_dx_kernel, td.dense_dx_kernel),
      (f"dense dW and db {hidden}x10",
       lambda h, dz: pd.dense_dw(h, dz, None, **blocks(hidden, "dw")),
       lambda h, dz: td.dense_dw(h, dz, None, relu=False, precision=p, blocks=tb), (h, z),
       pd.dense_dw_kernel, td.dense_dw_kernel),
      ("softmax cross-entropy forward", pallas_xent.xent_fwd, triton_xent.xent_fwd,
       (z, labels), pallas_xent.xent_fwd_kernel, triton_xent.xent_fwd_kernel),
      ("softmax cross-entropy backward",
       lambda z, l, s, c: pallas_xent.xent_bwd(z, l, s, c[0]), triton_xent.xent_bwd,
       (z, labels, logsum, scale), pallas_xent.xent_bwd_kernel, triton_xent.xent_bwd_kernel),
  ]


def kernel_rows(batch, hidden, precision, calls, triton_blocks=None):
  rows = []
  for name, p_fn, t_fn, args, p_kernel, t_kernel in cases(batch, hidden, precision,
                                                          triton_blocks):
    row = {"op": name}
    for impl, fn, kernel in (("pallas", p_fn, p_kernel), ("triton", t_fn, t_kernel)):
      compiled, seconds = compile_seconds(fn, args)
      times = gpu_kernels(compiled, args, calls)
      # The op's own kernel: the one run once a call (jax-triton names it after the function,
      # Pallas after the pallas_call); sums of dW's parts are small XLA fusions beside it.
      per_call = {k: statistics.median(v) for k, v in times.items() if len(v) == calls}
      main = max(per_call, key=per_call.get) if per_call else None
      row[impl] = dict(lines=code_lines(kernel), compile_s=seconds, kernel=main,
                       us=per_call.get(main, float("nan")),
                       others_us=sum(v for k, v in per_call.items() if k != main))
    rows.append(row)
  return rows


def step_row(impl: str, batch: int, precision: str) -> dict:
  """One profiled epoch of the MLP's training with ``impl``'s op kernels."""
  cfg = config.resolve(config.Config(impl=impl, model="mlp", batch_size=batch, epochs=2,
                                     precision=precision, epochs_per_call=1,
                                     fusion="ops" if impl == "pallas" else None))
  ds = runner.load_data(cfg)
  trainer = trainers.make_trainer(cfg, ds)
  trainer.compile()
  trainer.run_epoch(0)  # warm
  steps = len(ds.train_labels) // batch
  t0 = time.perf_counter()
  trainer.run_epoch(1)
  wall = time.perf_counter() - t0
  durations = [t for ts in profiled_kernels(lambda: trainer.run_epoch(1)).values() for t in ts]
  return dict(impl=impl, step_us=1e6 * wall / steps, kernels_us=sum(durations) / steps,
              kernels=len(durations) / steps)


def main(argv):
  del argv
  b, hdn, p = _BATCH.value, _HIDDEN.value, _PRECISION.value
  for flag, value in (("batch", b), ("hidden", hdn), ("calls", _CALLS.value)):
    cli.at_least(flag, value, 1)
  tb = parse_blocks(_TRITON_BLOCKS.value)
  import triton_kernels
  if why := triton_kernels.unavailable():
    raise config.ConfigError(f"benchmarks.kernel_times needs {why}")
  print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}; batch {b}, hidden {hdn}, {p}; "
        f"GPU us a call: median of {_CALLS.value} calls")
  if _OPS.value:
    op_table(b, hdn, p, tb)
  if _STEPS.value:
    step_table(b, p)


def parse_blocks(text: str | None):
  """[BM, BN, BK] from "BM,BN,BK", or None; read by the Pallas --blocks parser (powers of two of
  16 or more, which tl.arange and tl.dot need too)."""
  if not text:
    return None
  try:
    pairs = ops.parse_blocks(text)
  except ValueError:
    pairs = None
  if not isinstance(pairs, tuple):  # also "auto", which has no Triton meaning
    raise config.ConfigError(f"--triton_blocks takes three sizes of 16 or more, powers of two, "
                             f"BM,BN,BK; got {text!r}")
  return [v for _, v in pairs]


def op_table(b, hdn, p, tb):
  if tb:
    print(f"Triton dense tiles {tb}")
  print(f"| op | lines Pallas | lines Triton | compile s Pallas | compile s Triton "
        f"| us Pallas | us Triton | Triton / Pallas |")
  print("|---|---|---|---|---|---|---|---|")
  for r in kernel_rows(b, hdn, p, _CALLS.value, tb):
    pa, tr = r["pallas"], r["triton"]
    print(f"| {r['op']} | {pa['lines']} | {tr['lines']} | {pa['compile_s']:.2f} | "
          f"{tr['compile_s']:.2f} | {pa['us']:.2f} | {tr['us']:.2f} | {tr['us'] / pa['us']:.2f} |",
          flush=True)
    for impl in ("pallas", "triton"):
      if r[impl]["others_us"]:
        print(f"  ({impl}: {r[impl]['kernel']}, plus {r[impl]['others_us']:.2f} us of other "
              f"kernels a call)")


def step_table(b, p):
  """xla, the Pallas op kernels and Triton; Triton twice where it can be: its calls lowered to
  jaxlib's typed-FFI target (the default) and to jax-triton 0.3's legacy custom call."""
  from triton_kernels import ffi
  print("\n| impl | us a step (wall) | GPU us of its kernels | kernels a step |")
  print("|---|---|---|---|")
  runs = [("xla", "xla", None), ("pallas", "pallas (op kernels)", None)]
  if ffi.available():
    runs += [("triton", "triton, typed FFI call", True),
             ("triton", "triton, legacy custom call", False)]
  else:
    runs.append(("triton", "triton", None))
  for impl, name, typed_ffi in runs:
    if typed_ffi is not None:
      ffi.use_typed_ffi(typed_ffi)
      jax.clear_caches()  # Lower the step afresh with that rule.
    s = step_row(impl, b, p)
    print(f"| {name} | {s['step_us']:.1f} | {s['kernels_us']:.1f} | {s['kernels']:.1f} |",
          flush=True)
  ffi.use_typed_ffi(True)


if __name__ == "__main__":
  cli.run(main)
