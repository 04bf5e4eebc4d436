"""What the phase kernels' fetches from L2 cost (Pallas Mosaic GPU, Hopper): CTAs that each copy
``--kib`` KiB of bfloat16 tiles (16 KiB each, 64 x 128: the tile regression kernel's operand
halves) from global memory into shared memory by TMA, wait for them, and meet at the grid
barrier, step after step. The source is 16 MiB, in L2 after the first step as the kernel's
operands are (each step's copies of one CTA are tiles no other CTA reads in that step). With
0 KiB it is the barrier alone.

  python -m probes.l2_fetch                            # 128 CTAs: 0, 96 and 192 KiB a CTA
  python -m probes.l2_fetch --ctas=64,128 --kib=0,48,96,192

The tile regression kernel's product phases fetch 96 (C) or 192 KiB (B, F, G) a CTA, every part
of their operands (docs/bench/2026-12-07e_h100): a step here, less the barrier's alone, is what
such a fetch costs where nothing else runs, and its bytes over that time L2's bandwidth to the
SMs. Each cost is the difference between launches of ``--steps`` and 100 steps over the
difference in steps (median of ``--repeats`` each), so the launch drops out.
"""

from absl import flags

from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from probes import hopper

FLAGS = flags.FLAGS


def define_flags():
  """The script's flags; defined only when it runs, so that importing ``kernel`` (the tests do)
  leaves names such as --steps to the other scripts of the process."""
  flags.DEFINE_list("ctas", ["128"], "CTA counts (all resident: at most the SMs).")
  flags.DEFINE_list("kib", ["0", "96", "192"], "KiB each CTA fetches a step, in 16s.")
  flags.DEFINE_integer("steps", 1_100, "Steps of the long launch (the short has 100).")
  flags.DEFINE_integer("repeats", 7, "Timed launches of each (median).")

SHORT = 100
TILE_KIB = 16  # A (64, 128) bfloat16 tile
SOURCE_TILES = 1024  # 16 MiB of tiles to fetch from
MOST_TILES = 12  # 192 KiB of shared memory


def kernel(ctas: int, tiles: int, steps: int):
  """A jitted launch, of the source (``source()``): ``steps`` steps of each of ``ctas`` CTAs
  fetching ``tiles`` tiles (its own of the source, another set each step) and meeting at the
  grid barrier."""
  import jax
  import jax.numpy as jnp
  from jax import lax
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  from pallas_kernels.mgpu import grid_barrier
  bf16 = jnp.bfloat16

  def body(src, out, buf, mb):
    counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))
    c = lax.axis_index("cta")

    def step(s, carry):
      first = lax.rem((s * ctas + c) * tiles, SOURCE_TILES)
      for j in range(tiles):
        plgpu.copy_gmem_to_smem(src.at[lax.rem(first + j, SOURCE_TILES)], buf.at[j], mb.at[j])
      for j in range(tiles):
        plgpu.barrier_wait(mb.at[j])
      grid_barrier.barrier(counter.at[0], (s + 1) * ctas)
      grid_barrier.fence_for_copies()
      return carry

    lax.fori_loop(0, steps, step, 0)
    plgpu.copy_smem_to_gmem(buf.at[0], out.at[c])  # (what one copy brought: keeps them live)
    plgpu.wait_smem_to_gmem(0)

  return jax.jit(plgpu.kernel(
      body, out_type=jax.ShapeDtypeStruct((ctas, 64, 128), bf16),
      grid=(ctas,), grid_names=("cta",),
      scratch_types=[plgpu.SMEM((max(tiles, 1), 64, 128), bf16),
                     plgpu.Barrier(num_barriers=max(tiles, 1))]))


def source():
  """The tiles the CTAs fetch from: (SOURCE_TILES, 64, 128) bfloat16."""
  import jax.numpy as jnp
  return jnp.zeros((SOURCE_TILES, 64, 128), jnp.bfloat16)


def main(argv):
  del argv
  from pallas_kernels.mgpu import grid_barrier
  ctas_list = cli.ints("--ctas", FLAGS.ctas)
  kibs = cli.ints("--kib", FLAGS.kib, low=0)
  cli.at_least("--repeats", FLAGS.repeats, 1)
  steps = FLAGS.steps
  if steps <= SHORT:
    raise ConfigError(f"--steps must be above {SHORT}, got {steps}")
  for kib in kibs:
    if kib % TILE_KIB or kib > MOST_TILES * TILE_KIB:
      raise ConfigError(f"--kib: multiples of {TILE_KIB} up to {MOST_TILES * TILE_KIB}, "
                        f"not {kib}")
  d = hopper.require_hopper("l2_fetch")
  import jax
  print(f"device {d.device_kind}; jax {jax.__version__}; {SOURCE_TILES * TILE_KIB // 1024} MiB "
        f"source; us a step (a step's copies waited for, then the grid barrier)", flush=True)
  src = source()
  for ctas in ctas_list:
    grid_barrier.check_resident_ctas(ctas)
    alone = None
    for kib in kibs:
      tiles = kib // TILE_KIB
      short, long_ = kernel(ctas, tiles, SHORT), kernel(ctas, tiles, steps)
      us = hopper.us_per_step(lambda: short(src), lambda: long_(src), SHORT, steps,
                              FLAGS.repeats)
      line = f"{ctas:4d} CTAs, {kib:3d} KiB a CTA: {us:7.2f} us a step"
      if tiles == 0:
        alone = us
      elif alone is not None and us > alone:
        fetch = us - alone
        line += (f"; less the barrier alone {fetch:.2f} us, "
                 f"{ctas * kib * 1024 / fetch / 1e6:.2f} TB/s")
      print(line, flush=True)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
