"""Did a change to a Mosaic GPU kernel's Python change what runs on the GPU? Lowered on the CPU,
the kernel's Mosaic GPU modules (without debug locations, which move with every edited line)
are kept before the change and compared after it.

  python -m probes.same_module --kernel=cluster_mlp --hidden=2048 --save=/tmp/before.txt
  ... edit the kernel ...
  python -m probes.same_module --kernel=cluster_mlp --hidden=2048 --compare=/tmp/before.txt

IDENTICAL: the GPU runs the same module, so what was checked and timed on the GPU before still
holds (the same jax: lowering differs between versions). DIFFERENT: it must be checked on the
GPU again. The kernels: ``cluster_mlp`` (784-H-10, batch 64 P rows), ``cluster_epoch`` (the
regression net 32-H-1), ``grid_regression`` and ``tile_regression`` (32-256-256-1 and
32-256-1024-256-1), ``tile_mlp`` (the MLP 784-256-1024-256-10), ``logreg`` (softmax
regression in one CTA) and ``stream_population`` (two members of the MLP reference), each over
a few steps.
"""

from __future__ import annotations

import difflib
import functools
import pathlib

import jax
import jax.numpy as jnp
from absl import flags

from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError

_KERNEL = flags.DEFINE_string("kernel", "cluster_mlp",
                              "cluster_mlp, cluster_epoch, grid_regression, "
                              "tile_regression, tile_mlp, logreg or stream_population.")
_HIDDEN = flags.DEFINE_integer("hidden", 256, "Hidden units (cluster_mlp, cluster_epoch).")
_BATCH = flags.DEFINE_integer("batch", 64, "cluster_mlp: rows a step (64 P: P passes).")
_PRECISION = flags.DEFINE_string("precision", "float32", "float32, tf32 or bfloat16 "
                                 "(cluster_mlp, logreg).")
_STEPS = flags.DEFINE_integer("steps", 2, "Steps of the lowered launch.")
_SAVE = flags.DEFINE_string("save", None, "Write the modules' text to this file.")
_COMPARE = flags.DEFINE_string("compare", None, "Compare the modules with this --save file.")

KERNELS = ("cluster_mlp", "cluster_epoch", "grid_regression", "tile_regression", "tile_mlp",
           "logreg", "stream_population")


def _spec(*shape, dtype=jnp.float32):
  return jax.ShapeDtypeStruct(shape, dtype)


def lowered(kernel: str, hidden: int, batch: int, precision: str, steps: int):
  """The kernel's training launch, lowered for a Hopper GPU (on any machine)."""
  bf16 = jnp.bfloat16
  if kernel == "cluster_mlp":
    from pallas_kernels.fused import cluster_mlp_mgpu as m
    passes = batch // m.BATCH
    params = [{"w": _spec(m.INPUTS, hidden), "b": _spec(hidden)},
              {"w": _spec(hidden, m.CLASSES), "b": _spec(m.CLASSES)}]
    fn = functools.partial(m.train_steps, lr=0.1, precision=precision, passes=passes,
                           rowgroups=m.rowgroups_for(hidden, batch))
    args = (params, _spec(steps * passes, m.BATCH, m.PADDED, dtype=bf16),
            _spec(steps * passes, m.CLASSES, m.BATCH, dtype=bf16))
  elif kernel == "cluster_epoch":
    from pallas_kernels.fused import cluster_epoch_mgpu as m
    fn = functools.partial(m.train_steps, lr=0.01)
    args = (_spec(m.INPUTS, hidden), _spec(hidden), _spec(steps, m.BATCH, m.INPUTS),
            _spec(steps, m.BATCH))
  elif kernel == "grid_regression":
    from pallas_kernels.fused import grid_regression_mgpu as m
    fn = functools.partial(m.train_steps, lr=0.002)
    args = (_spec(m.INPUTS, m.HIDDEN), _spec(m.HIDDEN, m.HIDDEN), _spec(m.HIDDEN),
            _spec(steps, m.BATCH, m.INPUTS), _spec(steps, m.BATCH))
  elif kernel == "tile_regression":
    from pallas_kernels.fused import tile_regression_mgpu as m
    fn = functools.partial(m.train_steps, lr=0.002)
    w = m.WIDTHS
    args = (_spec(w[0], w[1]), _spec(w[1], w[2]), _spec(w[2], w[3]), _spec(w[3]),
            _spec(steps, m.BATCH, m.INPUTS), _spec(steps, m.BATCH))
  elif kernel == "tile_mlp":
    from pallas_kernels.fused import tile_mlp_mgpu as m
    fn = functools.partial(m.train_steps, lr=0.1)
    w = m.WIDTHS
    args = ([{"w": _spec(a, b), "b": _spec(b)} for a, b in zip(w[:-1], w[1:])],
            _spec(steps, m.BATCH, m.INPUTS, dtype=bf16), _spec(steps, m.BATCH, m.T))
  elif kernel == "stream_population":  # (two members, their own batches)
    from pallas_kernels.fused import stream_population_mgpu as m
    fn = m.train_steps
    args = ([{"w": _spec(2, 784, m.HIDDEN), "b": _spec(2, m.HIDDEN)},
             {"w": _spec(2, m.HIDDEN, m.CLASSES), "b": _spec(2, m.CLASSES)}], _spec(2),
            _spec(2, steps, m.BATCH, m.INPUTS, dtype=bf16), _spec(2, steps, m.ROWS, m.BATCH))
  else:
    from pallas_kernels.fused import logreg_mgpu as m
    fn = functools.partial(m.train_steps, lr=0.1, precision=precision)
    args = ([{"w": _spec(m.INPUTS, m.CLASSES), "b": _spec(m.CLASSES)}],
            _spec(steps, m.BATCH, m.PADDED, dtype=bf16), _spec(steps, m.BATCH, m.LANES))
  return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))


def modules_text(low) -> str:
  """Each Mosaic GPU custom call's module, printed without debug locations, in call order."""
  from jax._src.interpreters import mlir
  from jax._src.lib import mosaic_gpu_dialect
  from jax._src.lib.mlir import ir
  texts = []

  def visit(op):
    op = op.operation
    if op.name == "stablehlo.custom_call" and "mosaic_gpu" in str(
        op.attributes["call_target_name"]):
      config = ir.DictAttr(op.attributes["mhlo.backend_config"])
      texts.append(ir.StringAttr(config["module"]).value_bytes)
    for region in op.regions:
      for block in region:
        for inner in block:
          visit(inner)

  visit(low.compiler_ir("stablehlo").operation)
  if not texts:
    raise ConfigError("the lowered program holds no Mosaic GPU kernel")
  ctx = mlir.make_ir_context()
  mosaic_gpu_dialect.register_dialect(ctx)
  ctx.allow_unregistered_dialects = True
  with ctx:
    return "\n".join(ir.Module.parse(t).operation.get_asm(enable_debug_info=False)
                     for t in texts)


def main(argv):
  del argv
  cli.known("--kernel", [_KERNEL.value], KERNELS)
  cli.known("--precision", [_PRECISION.value], ("float32", "tf32", "bfloat16"))
  cli.at_least("--steps", _STEPS.value, 1)
  cli.at_least("--hidden", _HIDDEN.value, 1)
  if _BATCH.value < 64 or _BATCH.value % 64:
    raise ConfigError(f"--batch must be 64 P rows (P passes), not {_BATCH.value}")
  if bool(_SAVE.value) == bool(_COMPARE.value):
    raise ConfigError("give one of --save (before a change) and --compare (after it)")
  if _COMPARE.value and not pathlib.Path(_COMPARE.value).is_file():
    raise ConfigError(f"--compare {_COMPARE.value}: no such file (made by --save)")
  cli.writable(_SAVE.value, "--save")
  try:
    low = lowered(_KERNEL.value, _HIDDEN.value, _BATCH.value, _PRECISION.value, _STEPS.value)
  except ValueError as e:
    raise ConfigError(f"the kernel does not take these settings: {e}") from None
  text = f"jax {jax.__version__}\n" + modules_text(low)
  if _SAVE.value:
    pathlib.Path(_SAVE.value).write_text(text)
    print(f"saved {len(text):,} characters of Mosaic GPU modules to {_SAVE.value}")
    return
  before = pathlib.Path(_COMPARE.value).read_text()
  if before == text:
    print("IDENTICAL: the GPU runs the same modules as before")
    return
  changed = sum(1 for line in difflib.unified_diff(before.splitlines(), text.splitlines(), n=0)
                if line[:1] in "+-" and line[:3] not in ("+++", "---"))
  print(f"DIFFERENT: {changed} lines of the modules changed; check the kernel on the GPU again")
  raise SystemExit(1)


if __name__ == "__main__":
  cli.run(main)
