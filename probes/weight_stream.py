"""What a population kernel's weight stream costs (Pallas Mosaic GPU, Hopper): each CTA reads
its share of the members' weights from global memory and writes it back every step, as a kernel
must whose members do not fit on chip (64 members of 784-256-10 hold 54 MB of W0 in float32).

  python -m probes.weight_stream                        # 64 and 128 CTAs, 832 x 128 each
  python -m probes.weight_stream --products=false       # the copies alone
  python -m probes.weight_stream --profile --ctas=64    # each scope's time a tile
  python -m probes.weight_stream --form=registers       # W^T's tiles, parts from registers
  python -m probes.weight_stream --products=false --ctas=128 --reverse  # odd steps reversed

Each of ``--ctas`` CTAs (one a SM, no clusters, nothing shared) owns a (rows, cols) float32
block of global memory: by default half a member's W0 (832 x 128, 416 KB), so 128 CTAs hold
53 MB, more than the L2. A step walks the block in tiles of 64 rows, two in flight: a tile
comes in by TMA and goes back out to where it came from (every store waited for before the
next step reads the block again). With ``--products`` each tile also takes what a population
kernel on the tensor cores does to it: the weight gradient x[:, k]^T dz (the pixels exact in
one bfloat16 part, dz in three), the tile less lr times it, its three bfloat16 parts stored,
and the next step's forward x'[:, k] W[k] added to a (64, cols) accumulator (three products).
dz's parts are stand-ins held in shared memory; x's tiles too, or with ``--x=shared`` or
``--x=own`` two 8 KB tiles (the step's and the last step's) fetched with each weight tile from
one batch for all CTAs or from each CTA's own (the same rows every step: they may stay in L2).
``--work`` keeps only the tensor cores' or only the threads' part of a tile's work.
``--reverse`` walks the tiles last to first on odd steps, so that the tiles a step wrote last
are the next step's first while still in L2 (H100, 2026-12-08, the copies alone at 128 CTAs of
832 x 128: 37.35 us a step in one order, 25.04 reversed).
``--form=registers`` (``stream_registers``) does the same work on W^T's tiles, a warpgroup's
64 units each, the forward taking the updated tile's parts from registers, none stored. The
kernels are in ``probes.weight_stream_kernel``. The cost a step is the difference between
launches of 110 and 10 steps over 100, so the launch drops out; the line gives the bytes a step
over that time (HBM's rate, if the copies were all).
"""

import functools

import jax
from absl import flags

from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from probes import hopper
from probes.weight_stream_kernel import SCOPES, T, stream, stream_registers

FLAGS = flags.FLAGS
flags.DEFINE_list("ctas", ["64", "128"], "CTAs of the launch (at most the SM count).")
flags.DEFINE_integer("rows", 832, "Rows of each CTA's block (a multiple of 64).")
flags.DEFINE_integer("cols", 128, "Columns of each CTA's block: 64 or 128 (--form=plain).")
flags.DEFINE_enum("form", "plain", ["plain", "registers"],
                  "plain: W's tiles (64 inputs, cols units), their parts stored for the forward; "
                  "registers: W^T's (64 units, 64 inputs) a warpgroup, the parts from registers.")
flags.DEFINE_integer("warpgroups", 2, "--form=registers: warpgroups a CTA, 64 units each (1 or 2).")
flags.DEFINE_boolean("products", True, "Each tile's gradient, update, parts and forward too.")
flags.DEFINE_enum("work", "all", ["all", "tensor", "threads"],
                  "With --products, which of a tile's work: all, the tensor cores' products "
                  "alone, or the threads' update and parts alone.")
flags.DEFINE_enum("x", "held", ["held", "shared", "own"],
                  "x's tiles: held in shared memory (stand-ins), or fetched each tile (this "
                  "step's and the last's) from one batch for all CTAs or a batch a CTA.")
flags.DEFINE_bool("reverse", False, "Odd steps walk the tiles last to first (--form=plain): "
                  "the tiles written last are read first, while still in L2.")
flags.DEFINE_integer("repeats", 5, "Timed launches of each (median).")
flags.DEFINE_bool("profile", False, "Time each scope of a tile with Mosaic GPU's profiler "
                  "instead (3 steps, the first of --ctas).")
flags.DEFINE_string("profile_dir", "/tmp/weight_stream", "Where the profiler writes traces.")

SHORT, LONG = 10, 110


def main(argv):
  del argv
  if FLAGS.rows < T or FLAGS.rows % T:
    raise ConfigError(f"--rows must be a positive multiple of {T}, got {FLAGS.rows}")
  if FLAGS.cols not in (64, 128):
    raise ConfigError(f"--cols must be 64 or 128, got {FLAGS.cols}")
  if FLAGS.warpgroups not in (1, 2):
    raise ConfigError(f"--warpgroups must be 1 or 2, got {FLAGS.warpgroups}")
  if FLAGS.form == "registers" and FLAGS.reverse:
    raise ConfigError("--reverse is a --form=plain flag")
  if FLAGS.form == "registers" and (not FLAGS.products or FLAGS.work != "all"):
    raise ConfigError("--form=registers times the whole work: --products and --work=all")
  cli.at_least("repeats", FLAGS.repeats, 1)
  ctas_list = cli.ints("ctas", FLAGS.ctas)
  d = hopper.require_hopper("probes.weight_stream")
  rows = FLAGS.rows
  cols = FLAGS.cols if FLAGS.form == "plain" else T * FLAGS.warpgroups  # units a CTA
  if FLAGS.profile:
    return profile(min(ctas_list[0], d.core_count), rows, cols, FLAGS.profile_dir)
  kb = rows * cols * 4 / 1024
  what = "copies, gradients, updates, parts, forward" if FLAGS.products else "copies alone"
  what += f"; x {FLAGS.x}" + (f"; {FLAGS.work}" if FLAGS.products else "")
  if FLAGS.form == "registers":
    what += f"; transposed, parts from registers, {FLAGS.warpgroups} warpgroup(s)"
  if FLAGS.reverse:
    what += "; odd steps last tile first"
  print(f"{d.device_kind}, jax {jax.__version__}: {rows} x {cols} float32 a CTA ({kb:.0f} KB "
        f"in and out a step), {what}")
  for ctas in ctas_list:
    if ctas > d.core_count:
      print(f"  {ctas} CTAs: skipped, more than the {d.core_count} SMs")
      continue
    runs = [functools.partial(*launch(ctas, rows, cols, n)) for n in (SHORT, LONG)]
    us = hopper.us_per_step(*runs, SHORT, LONG, FLAGS.repeats)
    moved = 2 * ctas * rows * cols * 4  # bytes a step, in and out
    print(f"  {ctas} CTAs: {us:.2f} us a step, {moved / 1e6:.0f} MB moved a step "
          f"({moved / us / 1e6:.2f} TB/s)", flush=True)


def launch(ctas: int, rows: int, cols: int, steps: int, profile_dir: str | None = None):
  """The flags' form of the kernel: (jitted launch, its argument)."""
  if FLAGS.form == "registers":
    return stream_registers(ctas, rows, FLAGS.warpgroups, steps, FLAGS.x, profile_dir)
  return stream(ctas, rows, cols, steps, FLAGS.products, FLAGS.x, FLAGS.work, profile_dir,
                FLAGS.reverse)


def profile(ctas: int, rows: int, cols: int, trace_dir: str):
  """Each scope's time a tile, the median over the CTAs and the steps' tiles (the profiler's
  own cost included), and a step's traced span."""
  import os
  os.makedirs(trace_dir, exist_ok=True)
  steps = 3
  fn, xb = launch(ctas, rows, cols, steps, trace_dir)
  jax.block_until_ready(fn(xb))
  spans, first, last = hopper.trace_spans(trace_dir)
  print(f"profile of {steps} steps, {ctas} CTAs of {rows // T} tiles ({FLAGS.work}, x "
        f"{FLAGS.x}): us a tile, median (largest) over CTAs and tiles")
  for name, median, largest in hopper.scope_times(spans, SCOPES):
    print(f"  {name:9s} {median:7.3f} ({largest:7.3f})")
  median, largest = hopper.traced_span(first, last, steps)
  print(f"  {'step':9s} {median:7.2f} ({largest:7.2f}) traced")


if __name__ == "__main__":
  cli.run(main)
