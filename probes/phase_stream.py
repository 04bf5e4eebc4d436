"""What a step of a layer-phase kernel costs without its products (Pallas Mosaic GPU, Hopper):
grid barriers and the operands streamed through L2 by TMA, the floor of the kernel the deep
regression nets would need (docs/log/2026-11-28_mlp-2048-without-clusters.md sketches it).

  python -m probes.phase_stream                        # the sketch's volumes, 64 CTAs
  python -m probes.phase_stream --ctas=64,128 --in_kb=0 --out_kb=0   # the barrier alone

Each of ``--ctas`` CTAs (one a SM, no clusters, all resident) runs ``--steps`` steps of the
phases given by ``--in_kb`` and ``--out_kb`` (one entry a phase, KB a CTA, multiples of 8): it
copies ``out_kb`` from its shared memory to its slot in global memory (TMA, waited for), meets
every CTA at the grid barrier (``pallas_kernels.mgpu.grid_barrier``), then copies ``in_kb``
from the other CTAs' slots into its shared memory (TMA, 8 KB a copy, all issued before the
first wait). The slots alternate by step parity and stay in L2 (a few MB). The cost a step is
the difference between launches of 1,100 and 100 steps over 1,000, so the launch drops out;
the line also gives the step's bytes over that time, a CTA's L2 read rate if the barriers were
free.
"""

import jax
import jax.numpy as jnp
from absl import flags
from jax import lax

from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from probes import hopper

FLAGS = flags.FLAGS
flags.DEFINE_list("ctas", ["64", "128"], "CTAs of the launch (at most the SM count).")
# The sketch for 32-256-256-1 at batch 256, 64 CTAs (r, u), rounded up to 8 KB: phase A reads
# x's rows and writes h1's parts, B reads h1's rows and writes partial outputs, C writes the
# dW1 and dh1 parts, D reads them (and writes dW0's part).
flags.DEFINE_list("in_kb", ["8", "96", "8", "128"], "KB each CTA reads, a phase each.")
flags.DEFINE_list("out_kb", ["8", "8", "80", "8"], "KB each CTA writes, a phase each.")
flags.DEFINE_integer("repeats", 9, "Timed launches of each (median).")

CHUNK_ROWS, LANES = 8, 256  # A copy: 8 x 256 float32, 8 KB
SHORT, LONG = 100, 1_100


def stream(ctas: int, steps: int, ins: tuple, outs: tuple):
  """A jitted launch of ``steps`` steps of the phases (KB read, KB written) ``ins``, ``outs``."""
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  from pallas_kernels.mgpu import grid_barrier
  f32 = jnp.float32
  chunks_in = [kb // 8 for kb in ins]
  chunks_out = [kb // 8 for kb in outs]
  held = max(max(chunks_in), max(chunks_out), 1)  # Shared memory: this many chunks
  slots = max(max(chunks_out), 1)  # Global memory: a CTA's chunks a parity

  def body(out_ref, slots_ref, buf, loaded):
    counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))
    c = lax.axis_index("cta")

    def step(s, arrivals):
      parity = lax.rem(s, 2)
      for n_out, n_in in zip(chunks_out, chunks_in):
        if n_out:
          plgpu.commit_smem()
          for j in range(n_out):
            plgpu.copy_smem_to_gmem(buf.at[j], slots_ref.at[parity, c, j])
          plgpu.wait_smem_to_gmem(0)
        arrivals = arrivals + ctas
        grid_barrier.barrier(counter.at[0], arrivals)
        if n_in:
          grid_barrier.fence_for_copies()
          for j in range(n_in):
            peer = lax.rem(c + 1 + j, ctas)
            plgpu.copy_gmem_to_smem(slots_ref.at[parity, peer, j % slots], buf.at[j],
                                    loaded.at[j])
          for j in range(n_in):
            plgpu.barrier_wait(loaded.at[j])
      return arrivals

    lax.fori_loop(0, steps, step, jnp.int32(0))
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(buf.at[0], out_ref.at[c])
    plgpu.wait_smem_to_gmem(0)

  call = plgpu.kernel(
      body, out_type=(jax.ShapeDtypeStruct((ctas, CHUNK_ROWS, LANES), f32),
                      jax.ShapeDtypeStruct((2, ctas, slots, CHUNK_ROWS, LANES), f32)),
      grid=(ctas,), grid_names=("cta",),
      scratch_types=[plgpu.SMEM((held, CHUNK_ROWS, LANES), f32),
                     plgpu.Barrier(num_barriers=held)])
  return jax.jit(lambda: call()[0])


def main(argv):
  del argv
  ins, outs = cli.ints("in_kb", FLAGS.in_kb, 0), cli.ints("out_kb", FLAGS.out_kb, 0)
  if len(ins) != len(outs) or any(kb % 8 or kb > 192 for kb in ins + outs):
    raise ConfigError("--in_kb and --out_kb need one entry a phase, multiples of 8 up to 192")
  cli.at_least("repeats", FLAGS.repeats, 1)
  d = hopper.require_hopper("probes.phase_stream")
  print(f"{d.device_kind}, jax {jax.__version__}: phases in {ins} KB, out {outs} KB a CTA")
  for ctas in cli.ints("ctas", FLAGS.ctas):
    if ctas > d.core_count:
      print(f"  {ctas} CTAs: skipped, more than the {d.core_count} SMs")
      continue
    us = hopper.us_per_step(stream(ctas, SHORT, tuple(ins), tuple(outs)),
                            stream(ctas, LONG, tuple(ins), tuple(outs)),
                            SHORT, LONG, FLAGS.repeats)
    kb = sum(ins) + sum(outs)
    rate = f", {kb * 1.024 / us:.1f} GB/s a CTA" if kb else ""  # KiB a us
    print(f"  {ctas} CTAs: {us:.2f} us a step ({len(ins)} barriers, {kb} KB a CTA{rate})",
          flush=True)


if __name__ == "__main__":
  cli.run(main)
