"""What an exchange between the CTAs of one thread-block cluster costs (Pallas Mosaic GPU,
Hopper): the measurement behind docs/PERFORMANCE.md's "Mosaic GPU clusters".

  python -m experiments.cluster_exchange                       # 128 floats, clusters of 2-16
  python -m experiments.cluster_exchange --floats=128,1024 --clusters=4,8

Each of the C CTAs of one cluster runs ``--steps`` steps: it writes a vector to its shared
memory (two buffers, by step parity), arrives on a cluster barrier (an mbarrier in every CTA,
signalled by every CTA), waits, then reads every CTA's vector through distributed shared memory
and adds them up in a fixed order. Each step's written values depend on the last step's sums, so
the steps form one chain, and every sum is checked: a wrong value would mean the barrier let a
read overtake a write. The cost a step is the difference between launches of ``--steps`` and
1,000 steps, over the difference in steps (median of ``--repeats`` launches each), so the launch
itself drops out.

For comparison it times the grid-wide exchange of the epoch kernel the same way
(``mlp_epoch.barrier_stress``, Triton: every program writes a tile, meets all the others at the
grid barrier and reads its neighbour's tile) for the program counts in ``--grid_programs``.
"""

import functools
import sys

import jax
import jax.numpy as jnp
from absl import app, flags, logging
from jax import lax

from experiments import hopper

_FLOATS = flags.DEFINE_list("floats", ["128"], "Floats each CTA writes and every CTA reads.")
_CLUSTERS = flags.DEFINE_list("clusters", ["2", "4", "8", "16"], "Cluster sizes (CTAs).")
_STEPS = flags.DEFINE_integer("steps", 11_000, "Steps of the long launch (the short has 1,000).")
_REPEATS = flags.DEFINE_integer("repeats", 15, "Timed launches of each (median).")
_GRID = flags.DEFINE_list("grid_programs", ["16", "128", "132"],
                          "Programs of the grid-wide exchange timed for comparison (none: skip).")

SHORT = 1_000


def exchange(cluster: int, steps: int, floats: int):
  """A jitted kernel of ``steps`` exchanges among ``cluster`` CTAs; returns, per CTA, how many
  sums were wrong in each lane (zeros if every exchange read what was written)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu

  @functools.partial(
      plgpu.kernel,
      out_type=jax.ShapeDtypeStruct((cluster, floats), jnp.float32),
      grid=(1,), grid_names=("grid",), cluster=(cluster,), cluster_names=("cta",),
      # Two whole buffers rather than one (2, floats) array: a peer's view of a row picked by a
      # traced index did not lower in jax 0.11.2.
      scratch_types=[plgpu.SMEM((floats,), jnp.float32), plgpu.SMEM((floats,), jnp.float32),
                     plgpu.ClusterBarrier(collective_axes=("cta",), num_barriers=2)])
  def kernel(out_ref, even, odd, barrier):
    me = lax.axis_index("cta").astype(jnp.float32)
    ctas_sum = float(cluster * (cluster - 1) // 2)

    def one_step(s, slot, buf, carry):
      drift, wrong = carry
      s = s.astype(jnp.float32)
      buf[...] = drift + s * cluster + me  # drift is 0 while every sum is right.
      plgpu.barrier_arrive(barrier.at[slot])
      plgpu.barrier_wait(barrier.at[slot])
      total = plgpu.cluster_ref(buf, {"cta": 0})[...]
      for peer in range(1, cluster):
        total = total + plgpu.cluster_ref(buf, {"cta": peer})[...]
      want = s * (cluster * cluster) + ctas_sum
      return total - want, wrong + jnp.where(total != want, 1.0, 0.0)

    def two_steps(i, carry):  # Even steps write one buffer, odd steps the other.
      carry = one_step(2 * i, 0, even, carry)
      return one_step(2 * i + 1, 1, odd, carry)

    zeros = jnp.zeros((floats,), jnp.float32)
    drift, wrong = lax.fori_loop(0, steps // 2, two_steps, (zeros, zeros))
    out_ref[lax.axis_index("cta")] = wrong + jnp.abs(drift)

  return jax.jit(kernel)


def grid_exchange(programs: int, steps: int, floats: int):
  """The epoch kernel's grid-wide exchange (Triton): returns a function that runs ``steps``
  rounds of write, grid barrier, read among ``programs`` programs and gives the wrong reads."""
  from pallas_kernels import mlp_epoch
  return jax.jit(lambda: jnp.sum(mlp_epoch.barrier_stress(programs, steps, tile=floats)))


def time_per_step(make, steps: int, repeats: int):
  """(us a step, wrong values): launches of ``steps`` and of ``SHORT`` steps, median each."""
  long_run = make(steps)
  wrong = float(jnp.sum(long_run()))
  return hopper.us_per_step(make(SHORT), long_run, SHORT, steps, repeats), wrong


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  d = hopper.require_hopper("cluster_exchange")
  if _STEPS.value <= SHORT or _STEPS.value % 2:
    sys.exit(f"error: --steps must be an even number above {SHORT}, got {_STEPS.value}")
  print(f"device {d.device_kind}; jax {jax.__version__}; {_STEPS.value} and {SHORT} steps, "
        f"median of {_REPEATS.value} launches")
  print(f"{'CTAs':>4s} {'floats':>6s} {'us/step':>8s} {'wrong':>6s} {'KB read/CTA':>11s}")
  for floats in map(int, _FLOATS.value):
    for cluster in map(int, _CLUSTERS.value):
      try:
        us, wrong = time_per_step(lambda steps: exchange(cluster, steps, floats),
                                  _STEPS.value, _REPEATS.value)
        print(f"{cluster:4d} {floats:6d} {us:8.3f} {wrong:6.0f} "
              f"{cluster * floats * 4 / 1024:11.1f}", flush=True)
      except Exception as e:  # noqa: BLE001 -- a size the hardware or lowering refuses.
        print(f"{cluster:4d} {floats:6d}   failed: {type(e).__name__}: "
              f"{str(e).splitlines()[0][:150]}", flush=True)
        if "launch failure" in str(e):  # The CUDA context is gone: nothing after can run.
          sys.exit("error: a launch failed; later sizes need a fresh process")
  grid = [int(p) for p in _GRID.value if p.lower() != "none"]
  sms = getattr(d, "core_count", None)
  if grid:
    print(f"grid-wide exchange (Triton, one launch; reads one neighbour's tile; {sms} SMs)")
    print(f"{'programs':>8s} {'floats':>6s} {'us/step':>8s} {'wrong':>6s}")
  for programs in grid:
    if sms and programs > sms:  # Not all resident at once: the barrier would never open.
      print(f"{programs:8d}   skipped: more programs than the {sms} SMs")
      continue
    for floats in map(int, _FLOATS.value):
      us, wrong = time_per_step(lambda steps: grid_exchange(programs, steps, floats),
                                _STEPS.value, _REPEATS.value)
      print(f"{programs:8d} {floats:6d} {us:8.3f} {wrong:6.0f}", flush=True)


if __name__ == "__main__":
  app.run(main)
