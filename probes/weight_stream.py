"""What a population kernel's weight stream costs (Pallas Mosaic GPU, Hopper): each CTA reads
its share of the members' weights from global memory and writes it back every step, as a kernel
must whose members do not fit on chip (64 members of 784-256-10 hold 54 MB of W0 in float32).

  python -m probes.weight_stream                        # 64 and 128 CTAs, 832 x 128 each
  python -m probes.weight_stream --products=false       # the copies alone
  python -m probes.weight_stream --profile --ctas=64    # each scope's time a tile
  python -m probes.weight_stream --form=registers       # W^T's tiles, parts from registers

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
``--form=registers`` (``stream_registers``) does the same work on W^T's tiles, a warpgroup's
64 units each, the forward taking the updated tile's parts from registers, none stored. The cost a
step is the difference between launches of 110 and 10 steps over 100, so the launch drops out;
the line gives the bytes a step over that time (HBM's rate, if the copies were all).
"""

import functools

import jax
import jax.numpy as jnp
from absl import flags
from jax import lax

from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from probes import hopper

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
flags.DEFINE_integer("repeats", 5, "Timed launches of each (median).")
flags.DEFINE_bool("profile", False, "Time each scope of a tile with Mosaic GPU's profiler "
                  "instead (3 steps, the first of --ctas).")
flags.DEFINE_string("profile_dir", "/tmp/weight_stream", "Where the profiler writes traces.")

T = 64  # A tile's rows: wgmma's M and K, the batch
SHORT, LONG = 10, 110
SCOPES = ("fetch", "wait_in", "gradient", "update", "parts", "forward", "send", "step_end")


def stream(ctas: int, rows: int, cols: int, steps: int, products: bool, x: str = "held",
           work: str = "all", profile_dir: str | None = None):
  """A jitted launch of ``steps`` steps over each CTA's (rows, cols) block, and its argument
  (x's batches); ``x`` as the flag; ``profile_dir`` adds Mosaic GPU's profiler (``SCOPES``)."""
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  from pallas_kernels.ops.dense_mgpu import load, split3_in_kernel, store
  f32, bf16, wgmma_layout = jnp.float32, jnp.bfloat16, plgpu.Layout.WGMMA
  swizzled = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
  tiles, lr = rows // T, 0.01

  def body(x_ref, w_ref, h_ref, wbuf, parts, dz, xk, mb):
    c = lax.axis_index("cta")
    xs = 0 if x == "shared" else c

    def fetch(k, slot):
      plgpu.copy_gmem_to_smem(w_ref.at[c, pl.ds(k * T, T)], wbuf.at[slot], mb.at[slot])
      if x != "held":  # x's tile k of the last step (the gradient's) and of this one
        for j in range(2):
          plgpu.copy_gmem_to_smem(x_ref.at[xs, j, :, pl.ds(k * T, T)], xk[2 * slot + j],
                                  mb.at[2 + 2 * slot + j])

    def gradient(slot):  # x[:, k]^T dz over dz's three parts
      def run(acc):
        for i in (2, 1, 0):
          plgpu.wgmma(acc, xk[2 * slot].transpose((1, 0)), dz[i])
        plgpu.wgmma_wait(0)  # (the last tile's forward products too: its parts are rewritten)
        return acc[...]
      return pl.run_scoped(run, plgpu.ACC((T, cols), f32))

    def step(s, h):
      def run(acc):
        kept = h  # What the step computes, summed: nothing dropped
        fetch(0, 0)
        for k in range(tiles):
          slot = k % 2
          with jax.named_scope("fetch"):
            if k + 1 < tiles:  # once tile k - 1's forward products and store read the slot
              plgpu.wgmma_wait(0)
              plgpu.wait_smem_to_gmem(0, wait_read_only=True)
              fetch(k + 1, 1 - slot)
          with jax.named_scope("wait_in"):
            plgpu.barrier_wait(mb.at[slot])
            if x != "held":
              plgpu.barrier_wait(mb.at[2 + 2 * slot])
              plgpu.barrier_wait(mb.at[3 + 2 * slot])
          if products and work != "tensor":
            with jax.named_scope("gradient"):
              g = gradient(slot) if work == "all" else 1.0
            with jax.named_scope("update"):
              w = load(wbuf.at[slot], wgmma_layout) - lr * g
              store(wbuf.at[slot], w)
            with jax.named_scope("parts"):
              for ref, part in zip(parts, split3_in_kernel(w, ptx=True)):
                ref[...] = part
              plgpu.commit_smem()
          elif products:
            with jax.named_scope("gradient"):
              kept = kept + gradient(slot)
          with jax.named_scope("forward"):
            if products and work != "threads":
              for i in (2, 1, 0):
                plgpu.wgmma(acc, xk[2 * slot + 1], parts[i])
          with jax.named_scope("send"):
            plgpu.copy_smem_to_gmem(wbuf.at[slot], w_ref.at[c, pl.ds(k * T, T)])
        with jax.named_scope("step_end"):
          plgpu.wgmma_wait(0)
          plgpu.wait_smem_to_gmem(0)  # Every tile back in global memory before the next step
        return kept + acc[...]
      return pl.run_scoped(run, plgpu.ACC((T, cols), f32))

    h = lax.fori_loop(0, steps, step,
                      plgpu.layout_cast(jnp.zeros((T, cols), f32), wgmma_layout))
    store(wbuf.at[0], h)  # The forward's sums out, so that nothing is dropped
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(wbuf.at[0], h_ref.at[c])
    plgpu.wait_smem_to_gmem(0)

  parts3 = [plgpu.SMEM((T, cols), bf16, transforms=swizzled)] * 3
  params = {}
  if profile_dir:
    params.update(profile_space=(len(SCOPES) * tiles + 1) * steps, profile_dir=profile_dir)
  call = plgpu.kernel(
      body, out_type=(jax.ShapeDtypeStruct((ctas, rows, cols), f32),
                      jax.ShapeDtypeStruct((ctas, T, cols), f32)),
      grid=(ctas,), grid_names=("cta",),
      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane,
                                           **params),
      scratch_types=[plgpu.SMEM((2, T, cols), f32), parts3, parts3,
                     [plgpu.SMEM((T, T), bf16, transforms=swizzled)] * 4,
                     plgpu.Barrier(num_barriers=6)])
  xb = jnp.zeros((ctas if x == "own" else 1, 2, T, rows), bf16)  # pixels, as integers
  return jax.jit(lambda xb: call(xb)[1]), xb


def stream_registers(ctas: int, rows: int, warpgroups: int, steps: int, x: str = "own",
                     profile_dir: str | None = None):
  """``stream``'s work in the transposed form a kernel could take instead: each CTA owns W^T,
  (64 warpgroups, rows) float32, each warpgroup 64 units of it, and a tile is (64 units, 64
  inputs). The gradient dz[:, units]^T x[:, k] comes out in the tile's own layout, and the
  forward z^T += W^T[:, k] x'[:, k]^T takes the updated tile's three parts from registers (the
  tensor cores' A operand), so no part is stored: the threads load and store the float32 tile
  only. Returns what ``stream`` returns."""
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  from pallas_kernels.ops.dense_mgpu import load, split3_in_kernel, store
  f32, bf16, wgmma_layout = jnp.float32, jnp.bfloat16, plgpu.Layout.WGMMA
  swizzled = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
  tiles, lr, units = rows // T, 0.01, warpgroups * T

  def body(x_ref, w_ref, h_ref, wbuf, dz, xk, mb):
    c = lax.axis_index("cta")
    g = lax.axis_index("wg") if warpgroups > 1 else 0
    xs = 0 if x == "shared" else c
    mine = pl.ds(pl.multiple_of(g * T, T), T)  # The warpgroup's units

    def fetch(k, slot):  # (each warpgroup its own copies: no waits across warpgroups)
      plgpu.copy_gmem_to_smem(w_ref.at[c, mine, pl.ds(k * T, T)], wbuf.at[g, slot],
                              mb.at[g * 6 + slot])
      if x != "held":
        for j in range(2):
          plgpu.copy_gmem_to_smem(x_ref.at[xs, j, :, pl.ds(k * T, T)], xk.at[g, slot, j],
                                  mb.at[g * 6 + 2 + 2 * slot + j])

    def gradient(slot):  # dz[:, units]^T x[:, k] over dz's three parts: the tile's layout
      def run(acc):
        for i in (2, 1, 0):
          plgpu.wgmma(acc, dz.at[g, i].transpose((1, 0)), xk.at[g, slot, 0])
        plgpu.wgmma_wait(0)
        return acc[...]
      return pl.run_scoped(run, plgpu.ACC((T, T), f32))

    def step(s, h):
      def run(acc):
        fetch(0, 0)
        for k in range(tiles):
          slot = k % 2
          with jax.named_scope("fetch"):
            if k + 1 < tiles:  # once tile k - 1's forward products and store read the slot
              plgpu.wgmma_wait(0)
              plgpu.wait_smem_to_gmem(0, wait_read_only=True)
              fetch(k + 1, 1 - slot)
          with jax.named_scope("wait_in"):
            plgpu.barrier_wait(mb.at[g * 6 + slot])
            if x != "held":
              plgpu.barrier_wait(mb.at[g * 6 + 2 + 2 * slot])
              plgpu.barrier_wait(mb.at[g * 6 + 3 + 2 * slot])
          with jax.named_scope("gradient"):
            grad = gradient(slot)
          with jax.named_scope("update"):
            w = load(wbuf.at[g, slot], wgmma_layout) - lr * grad
            store(wbuf.at[g, slot], w)
            plgpu.commit_smem()
          with jax.named_scope("forward"):  # the parts from registers
            for part in reversed(split3_in_kernel(w, ptx=True)):
              plgpu.wgmma(acc, part, xk.at[g, slot, 1].transpose((1, 0)))
          with jax.named_scope("send"):
            plgpu.copy_smem_to_gmem(wbuf.at[g, slot], w_ref.at[c, mine, pl.ds(k * T, T)])
        with jax.named_scope("step_end"):
          plgpu.wgmma_wait(0)
          plgpu.wait_smem_to_gmem(0)
        return h + acc[...]
      return pl.run_scoped(run, plgpu.ACC((T, T), f32))

    h = lax.fori_loop(0, steps, step,
                      plgpu.layout_cast(jnp.zeros((T, T), f32), wgmma_layout))
    store(wbuf.at[g, 0], h)
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(wbuf.at[g, 0], h_ref.at[c, mine])
    plgpu.wait_smem_to_gmem(0)

  params = {}
  if profile_dir:
    params.update(profile_space=(len(SCOPES) * tiles + 1) * steps, profile_dir=profile_dir)
  threads = dict(num_threads=warpgroups, thread_name="wg") if warpgroups > 1 else {}
  call = plgpu.kernel(
      body, out_type=(jax.ShapeDtypeStruct((ctas, units, rows), f32),
                      jax.ShapeDtypeStruct((ctas, units, T), f32)),
      grid=(ctas,), grid_names=("cta",), **threads,
      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane,
                                           **params),
      scratch_types=[plgpu.SMEM((warpgroups, 2, T, T), f32),
                     plgpu.SMEM((warpgroups, 3, T, T), bf16, transforms=swizzled),
                     plgpu.SMEM((warpgroups, 2, 2, T, T), bf16, transforms=swizzled),
                     plgpu.Barrier(num_barriers=6 * warpgroups)])
  xb = jnp.zeros((ctas if x == "own" else 1, 2, T, rows), bf16)
  return jax.jit(lambda xb: call(xb)[1]), xb


def main(argv):
  del argv
  if FLAGS.rows < T or FLAGS.rows % T:
    raise ConfigError(f"--rows must be a positive multiple of {T}, got {FLAGS.rows}")
  if FLAGS.cols not in (64, 128):
    raise ConfigError(f"--cols must be 64 or 128, got {FLAGS.cols}")
  if FLAGS.warpgroups not in (1, 2):
    raise ConfigError(f"--warpgroups must be 1 or 2, got {FLAGS.warpgroups}")
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
  return stream(ctas, rows, cols, steps, FLAGS.products, FLAGS.x, FLAGS.work, profile_dir)


def profile(ctas: int, rows: int, cols: int, trace_dir: str):
  """Each scope's time a tile, the median over the CTAs and the steps' tiles (the profiler's
  own cost included), and a step's traced span."""
  import os
  import statistics
  os.makedirs(trace_dir, exist_ok=True)
  steps = 3
  fn, xb = launch(ctas, rows, cols, steps, trace_dir)
  jax.block_until_ready(fn(xb))
  spans, first, last = hopper.trace_spans(trace_dir)
  print(f"profile of {steps} steps, {ctas} CTAs of {rows // T} tiles ({FLAGS.work}, x "
        f"{FLAGS.x}): us a tile, median (largest) over CTAs and tiles")
  for name in SCOPES:
    v = [t for (c, n), ts in spans.items() if n == name for t in ts]
    if v:
      print(f"  {name:9s} {statistics.median(v):7.3f} ({max(v):7.3f})")
  span = [(last[c] - first[c]) / steps for c in first]
  print(f"  {'step':9s} {statistics.median(span):7.2f} ({max(span):7.2f}) traced")


if __name__ == "__main__":
  cli.run(main)
