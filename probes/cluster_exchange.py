"""What an exchange between the CTAs of one thread-block cluster costs (Pallas Mosaic GPU,
Hopper): the measurement behind the cluster exchanges in docs/design/cluster_kernels.md.

  python -m probes.cluster_exchange                       # 128 floats, clusters of 2-16
  python -m probes.cluster_exchange --floats=128,1024 --clusters=4,8
  python -m probes.cluster_exchange --mlp --clusters= --grid_programs=none

Each of the C CTAs of one cluster runs ``--steps`` steps: it writes a vector to its shared
memory (two buffers, by step parity), arrives on a cluster barrier (an mbarrier in every CTA,
signalled by every CTA), waits, then reads every CTA's vector through distributed shared memory
and adds them up in a fixed order. Each step's written values depend on the last step's sums, so
the steps form one chain, and every sum is checked: a wrong value would mean the barrier let a
read overtake a write. The cost a step is the difference between launches of ``--steps`` and
1,000 steps, over the difference in steps (median of ``--repeats`` launches each), so the launch
itself drops out.

``--mlp`` also times cluster_mlp_mgpu's two exchanges alone, pulled (as above: a cluster
barrier, then reads of the peers' memory) and pushed (``pallas_kernels.mgpu.cluster_push``: each
row copied into the receiver's memory, completing on its mbarrier; no cluster barrier), the
pushes issued by one thread one after another (``pushed``) or by the warpgroup's four warps
(``spread``, as the kernel does). 16 CTAs, the kernel's shapes: each CTA has ten columns of 64
floats, CTA k < 10 adds up the 16 CTAs' column k in CTA order, then every CTA gets the ten sums
and checks them; the next step's columns depend on them.

For comparison it times the grid-wide exchange of the epoch kernel the same way
(``mlp_epoch.barrier_stress``, Triton: every program writes a tile, meets all the others at the
grid barrier and reads its neighbour's tile) for the program counts in ``--grid_programs``, and
the same exchange in Mosaic GPU (``pallas_kernels.mgpu.grid_barrier``: the row written and read
by TMA copies, the barrier a global semaphore) for ``--mgpu_grid_programs``.
"""

import functools
import sys

import jax
import jax.numpy as jnp
from absl import flags
from jax import lax

from jaxshallow.run import cli
from jaxshallow.run.config import ConfigError
from probes import hopper

FLAGS = flags.FLAGS


def define_flags():
  """The script's flags; defined only when it runs, so that importing ``mlp_exchanges`` (the
  tests do) leaves names such as --repeats to the other scripts of the process."""
  flags.DEFINE_list("floats", ["128"], "Floats each CTA writes and every CTA reads.")
  flags.DEFINE_list("clusters", ["2", "4", "8", "16"], "Cluster sizes (CTAs).")
  flags.DEFINE_integer("steps", 11_000, "Steps of the long launch (the short has 1,000).")
  flags.DEFINE_integer("repeats", 15, "Timed launches of each (median).")
  flags.DEFINE_bool("mlp", False,
                    "Also time cluster_mlp_mgpu's two exchanges: pulled, pushed, spread.")
  flags.DEFINE_list("mgpu_grid_programs", ["16", "128", "132"],
                    "CTAs of the Mosaic GPU grid-wide exchange (none: skip).")
  flags.DEFINE_list("grid_programs", ["16", "128", "132"],
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


def mlp_exchanges(steps: int, form: str):
  """A jitted kernel of ``steps`` of cluster_mlp_mgpu's two exchanges (16 CTAs, ten columns of 64
  floats), ``form`` pulled, pushed (by one thread) or spread (pushed by four warps); returns, per
  CTA and row, how many sums were wrong plus the drift (zeros if right)."""
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  from pallas_kernels.mgpu import cluster_push
  from pallas_kernels.ops.dense_mgpu import load
  ctas, classes, rows = 16, 10, 64
  by_row = plgpu.Layout.WGMMA.reduce(1)  # cluster_mlp_mgpu's layout of a column
  pushed = form != "pulled"
  if pushed:
    buffers = [plgpu.SMEM((classes + 1, rows), jnp.float32),  # the columns, then the sum
               plgpu.SMEM((ctas, rows), jnp.float32),  # class c's columns, one row a CTA
               plgpu.SMEM((classes + 1, rows), jnp.float32)]  # the sums, then 2 mbarriers
  else:  # A whole buffer each: a peer's view of a row does not lower (jax 0.11.2).
    buffers = [plgpu.SMEM((rows,), jnp.float32) for _ in range(classes + 1)]

  @functools.partial(
      plgpu.kernel, out_type=jax.ShapeDtypeStruct((ctas, rows), jnp.float32),
      grid=(1,), grid_names=("grid",), cluster=(ctas,), cluster_names=("cta",),
      compiler_params=plgpu.CompilerParams(unsafe_no_auto_barriers=True),
      scratch_types=[plgpu.ClusterBarrier(collective_axes=("cta",), num_barriers=5), *buffers])
  def kernel(out_ref, barrier, *buffers):
    c = lax.axis_index("cta")
    if pushed:
      columns, inbox, sums_in = buffers
      bars = sums_in.at[classes]
      cluster_push.init(bars, (ctas, classes))
      column = columns.at  # column[k]: this CTA's column k; column[classes]: its class's sum
    else:
      column = buffers
    row = plgpu.layout_cast(lax.broadcasted_iota(jnp.int32, (rows,), 0), by_row)
    row = row.astype(jnp.float32)

    def meet(i):
      plgpu.commit_smem()
      plgpu.barrier_arrive(barrier.at[i])
      plgpu.barrier_wait(barrier.at[i])

    def want(s, k):  # The sum over c of (s mod 997) + c + 16 k + row
      return ctas * (lax.rem(s, 997).astype(jnp.float32) + 16.0 * k + row) + 120.0

    def step(s, parity, carry):
      drift, wrong = carry
      mine = lax.rem(s, 997).astype(jnp.float32) + c.astype(jnp.float32) + row + drift
      for k in range(classes):
        column[k][...] = mine + 16.0 * k
      if pushed:
        plgpu.commit_smem()  # The columns visible to the copy engine
        if form == "spread":
          cluster_push.scatter(columns.at[pl.ds(0, classes)], inbox, bars, 0)
        else:
          for k in range(classes):
            cluster_push.push(columns.at[k], inbox, bars, 0, k)

        @pl.when(c < classes)
        def _():
          cluster_push.wait(bars, 0, parity)
          columns.at[classes][...] = functools.reduce(
              jnp.add, [load(inbox.at[peer], by_row) for peer in range(ctas)])
          plgpu.commit_smem()
          if form == "spread":
            cluster_push.broadcast(columns.at[classes], sums_in, bars, 1, ctas)
          else:
            for peer in range(ctas):
              cluster_push.push(columns.at[classes], sums_in, bars, 1, peer)
        cluster_push.wait(bars, 1, parity)
        sums = [load(sums_in.at[k], by_row) for k in range(classes)]
      else:
        meet(parity)

        for k in range(classes):
          @pl.when(c == k)
          def _():  # All 16 reads in flight together, then added up in CTA order
            column[classes][...] = functools.reduce(
                jnp.add, [load(plgpu.cluster_ref(column[k], {"cta": peer}), by_row)
                          for peer in range(ctas)])
        meet(2 + parity)
        sums = [load(plgpu.cluster_ref(column[classes], {"cta": k}), by_row)
                for k in range(classes)]
      bad = functools.reduce(jnp.add, [jnp.where(v != want(s, k), 1.0, 0.0)
                                       for k, v in enumerate(sums)])
      return sums[0] - want(s, 0), wrong + bad

    def two_steps(i, carry):
      return step(2 * i + 1, 1, step(2 * i, 0, carry))

    drift, wrong = lax.fori_loop(0, steps // 2, two_steps, (row * 0.0, row * 0.0))
    meet(4)  # No CTA leaves while a peer may still read or write its memory.
    column[0][...] = wrong + jnp.abs(drift)
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(column[0], out_ref.at[c])
    plgpu.wait_smem_to_gmem(0)

  return jax.jit(kernel)


def grid_exchange(programs: int, steps: int, floats: int):
  """The epoch kernel's grid-wide exchange (Triton): returns a function that runs ``steps``
  rounds of write, grid barrier, read among ``programs`` programs and gives the wrong reads."""
  from pallas_kernels.fused import mlp_epoch
  return jax.jit(lambda: jnp.sum(mlp_epoch.barrier_stress(programs, steps, tile=floats)))


def mgpu_grid_exchange(programs: int, steps: int, floats: int):
  """The same exchange in Mosaic GPU: a TMA copy out, the global-semaphore barrier, a TMA copy
  in (``grid_barrier.exchange``)."""
  from pallas_kernels.mgpu import grid_barrier
  return grid_barrier.exchange(programs, steps, floats)


def time_per_step(make, steps: int, repeats: int):
  """(us a step, wrong values): launches of ``steps`` and of ``SHORT`` steps, median each."""
  long_run = make(steps)
  wrong = float(jnp.sum(long_run()))
  return hopper.us_per_step(make(SHORT), long_run, SHORT, steps, repeats), wrong


def _counts(flag: str, values) -> list[int]:
  """A list flag of CTA or program counts; empty, or "none", skips that part."""
  if not values or [v.lower() for v in values] == ["none"]:
    return []
  return cli.ints(flag, values)


def main(argv):
  del argv
  if FLAGS.steps <= SHORT or FLAGS.steps % 2:
    raise ConfigError(f"--steps must be an even number above {SHORT}, got {FLAGS.steps}")
  cli.at_least("repeats", FLAGS.repeats, 1)
  cli.ints("floats", FLAGS.floats)
  clusters = _counts("clusters", FLAGS.clusters)
  grid = _counts("grid_programs", FLAGS.grid_programs)
  mgpu = _counts("mgpu_grid_programs", FLAGS.mgpu_grid_programs)
  d = hopper.require_hopper("cluster_exchange")
  print(f"device {d.device_kind}; jax {jax.__version__}; {FLAGS.steps} and {SHORT} steps, "
        f"median of {FLAGS.repeats} launches")
  if clusters:
    print(f"{'CTAs':>4s} {'floats':>6s} {'us/step':>8s} {'wrong':>6s} {'KB read/CTA':>11s}")
  for floats in map(int, FLAGS.floats):
    for cluster in clusters:
      try:
        us, wrong = time_per_step(lambda steps: exchange(cluster, steps, floats),
                                  FLAGS.steps, FLAGS.repeats)
        print(f"{cluster:4d} {floats:6d} {us:8.3f} {wrong:6.0f} "
              f"{cluster * floats * 4 / 1024:11.1f}", flush=True)
      except Exception as e:  # noqa: BLE001 -- a size the hardware or lowering refuses.
        print(f"{cluster:4d} {floats:6d}   failed: {type(e).__name__}: "
              f"{str(e).splitlines()[0][:150]}", flush=True)
        if "launch failure" in str(e):  # The CUDA context is gone: nothing after can run.
          sys.exit("error: a launch failed; later sizes need a fresh process")
  if FLAGS.mlp:
    print("cluster_mlp_mgpu's two exchanges (16 CTAs, ten columns of 64 floats)")
    print(f"{'form':>8s} {'us/step':>8s} {'wrong':>6s}")
    for form in ("pulled", "pushed", "spread"):
      us, wrong = time_per_step(lambda steps: mlp_exchanges(steps, form),
                                FLAGS.steps, FLAGS.repeats)
      print(f"{form:>8s} {us:8.3f} {wrong:6.0f}", flush=True)
  sms = getattr(d, "core_count", None)
  _grid_table(f"grid-wide exchange (Triton, one launch; reads one neighbour's tile; {sms} SMs)",
              "programs", grid, grid_exchange, sms)
  _grid_table(f"grid-wide exchange (Mosaic GPU: TMA copies, a global semaphore; {sms} SMs)",
              "CTAs", mgpu, mgpu_grid_exchange, sms)


def _grid_table(title: str, unit: str, counts: list[int], make, sms) -> None:
  """A grid-wide exchange (``make(programs, steps, floats)``) timed at each count of
  ``unit``s and each of ``--floats``: a row each."""
  if counts:
    print(title)
    print(f"{unit:>8s} {'floats':>6s} {'us/step':>8s} {'wrong':>6s}")
  for programs in counts:
    if sms and programs > sms:  # Not all resident at once: the barrier would never open.
      print(f"{programs:8d}   skipped: more {unit} than the {sms} SMs")
      continue
    for floats in map(int, FLAGS.floats):
      us, wrong = time_per_step(lambda steps: make(programs, steps, floats),
                                FLAGS.steps, FLAGS.repeats)
      print(f"{programs:8d} {floats:6d} {us:8.3f} {wrong:6.0f}", flush=True)

if __name__ == "__main__":
  define_flags()
  cli.run(main)
