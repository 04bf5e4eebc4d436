"""A grid-wide barrier between the CTAs of one Mosaic GPU launch (Pallas Mosaic GPU, Hopper):
the first piece of an epoch kernel on Mosaic GPU beyond one thread-block cluster.

A cluster holds at most 16 CTAs; a network whose weights need more SMs (the MLP's 784-1024-10
keeps 4.8 MB of W0's bfloat16 parts, 132 SMs hold 30 MB of shared memory) needs its CTAs to
meet across the whole GPU, as the Triton-lowered grid epoch kernel (``mlp_epoch.grid_barrier``)
does with its own atomics. Here the barrier is Pallas' global semaphore: a counter in global
memory that every CTA increments once a barrier (``red.release.gpu``: what the CTA wrote before
is visible to whoever sees the increment) and then waits on until it reaches the count of all
CTAs' arrivals so far (``ld.relaxed.gpu`` spins, then ``fence.acquire.gpu``). The counter only
grows, so the k-th barrier waits for k x CTAs arrivals and needs no reset; it comes from
``pl.get_global`` (one for the grid, which Pallas passes in zeroed at each launch), not from the
kernel's scratch shapes, whose semaphores are each CTA's own. All CTAs must be resident at once
(at most one a SM), or the barrier never opens. ``share`` is one round of an exchange through
global memory around it (TMA copies out and in).

``exchange`` is its stress test and timing: every CTA writes a row to global memory, meets the
others, and reads its neighbour's row; any wrong value counts (``probes.cluster_exchange
--mgpu_grid_programs``). GPU only: Mosaic GPU's interpreter (jax 0.11, 0.12) cannot start
from a global semaphore ("nan + semaphore"), so the CPU tests check its lowering.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


# The most clusters of 16 CTAs an H100 SXM holds at once (each takes 16 SMs of one GPC): the
# clusters of one network that meet at this barrier every step must all be resident.
MAX_CLUSTERS = 7
H100_SMS = 132


def resident_clusters() -> int:
  """The most clusters of 16 CTAs one launch may have meet here: MAX_CLUSTERS on a GPU of 132
  SMs or more (the H100 SXM's, where it was measured) and off the GPU (so that the choices
  made from it are the same in the tests), else one (a GPU with fewer SMs may hold fewer
  clusters of 16, and the barrier would never open). A rule of thumb from the SM count, not
  CUDA's occupancy query (cudaOccupancyMaxActiveClusters), which jax does not expose."""
  return MAX_CLUSTERS if resident_ctas() >= H100_SMS else 1


def resident_ctas() -> int:
  """The most CTAs of one launch without clusters that may meet here, at one a SM (as the
  cluster kernels' shared memory makes them): the GPU's SM count; off the GPU an H100 SXM's
  132 (so that the choices made from it are the same in the tests)."""
  d = jax.devices()[0]
  if d.platform != "gpu":
    return H100_SMS
  return int(getattr(d, "core_count", 0) or 0)


def check_resident(clusters: int) -> None:
  """ValueError where ``clusters`` clusters of 16 CTAs would not all be resident at once: the
  barrier would never open (a hang)."""
  if clusters > (resident := resident_clusters()):
    raise ValueError(f"{clusters} clusters of 16 CTAs are more than the {resident} this GPU "
                     "holds at once")


def check_resident_ctas(ctas: int) -> None:
  """ValueError where ``ctas`` CTAs of one a SM, without clusters, would not all be resident at
  once (``check_resident``'s twin for launches without clusters)."""
  if ctas > (resident := resident_ctas()):
    raise ValueError(f"{ctas} CTAs are more than the {resident} this GPU holds at once")


def barrier(counter, arrivals) -> None:
  """Every CTA (all its threads) calls it, the k-th time with ``arrivals`` = k x CTAs."""
  arrive(counter)
  wait(counter, arrivals)


def arrive(counter) -> None:
  """``barrier``'s first half: what this CTA wrote before is released to the others. A CTA may
  work between ``arrive`` and ``wait`` on what no other CTA reads before the next barrier."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  plgpu.semaphore_signal(counter, 1, memory_scope="gpu")


def wait(counter, arrivals) -> None:
  """``barrier``'s second half: until ``arrivals`` CTAs' arrivals in all."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  plgpu.semaphore_wait(counter, arrivals, decrement=False, memory_scope="gpu")


def fence_for_copies() -> None:
  """After the barrier, before a TMA copy (the async proxy) reads what other CTAs wrote: the
  acquire orders the generic proxy's reads only; PTX's memory model asks for a proxy fence
  before the async proxy's (the writer's side needs none: a bulk copy's completion, waited for
  before the arrival, carries one)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu

  @plgpu.inline_mgpu()
  def emit(ctx):
    del ctx
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import llvm
    llvm.inline_asm(ir.Type.parse("!llvm.void"), [], "fence.proxy.async.global;", "",
                    has_side_effects=True)
  emit()


def share(counter, arrivals, mine, out, rows, into, loaded) -> None:
  """One round of an exchange through global memory: this CTA's shared-memory ``mine`` copied
  to global ``out``, the barrier (its ``arrivals``-th count), then the global ``rows`` the
  others wrote copied into shared ``into`` (waited for on the mbarrier ``loaded``)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  plgpu.commit_smem()  # What the threads stored, visible to the copy
  plgpu.copy_smem_to_gmem(mine, out)
  plgpu.wait_smem_to_gmem(0)  # The copy is done, not only its read of shared memory.
  barrier(counter, arrivals)
  fence_for_copies()
  plgpu.copy_gmem_to_smem(rows, into, loaded)
  plgpu.barrier_wait(loaded)


def exchange(programs: int, steps: int, floats: int = 128):
  """A function of no arguments that runs ``steps`` rounds of: write a row of ``floats`` (the
  round's and the CTA's number) to global memory (two buffers, by round parity), the grid
  barrier, read the next CTA's row; it returns each CTA's count of wrong values read."""
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32 = jnp.float32

  def body(wrong_ref, rows_ref, mine, theirs, loaded):
    # One counter for the whole grid: a semaphore among the scratch shapes would be each
    # CTA's own (block-local), and the barrier would never open.
    counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))
    c = lax.axis_index("cta")
    peer = lax.rem(c + 1, programs)

    def round_(r, wrong):
      parity = lax.rem(r, 2)
      mine[...] = jnp.full((floats,), (r * programs + c).astype(f32))
      share(counter.at[0], (r + 1) * programs, mine, rows_ref.at[parity, c],
            rows_ref.at[parity, peer], theirs, loaded.at[0])
      want = (r * programs + peer).astype(f32)
      return wrong + jnp.sum(jnp.where(theirs[...] != want, 1.0, 0.0))

    wrong = lax.fori_loop(0, steps, round_, jnp.float32(0))
    mine[...] = jnp.full((floats,), wrong)
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(mine, wrong_ref.at[c])
    plgpu.wait_smem_to_gmem(0)

  call = plgpu.kernel(
      body, out_type=(jax.ShapeDtypeStruct((programs, floats), f32),
                      jax.ShapeDtypeStruct((2, programs, floats), f32)),
      grid=(programs,), grid_names=("cta",),
      scratch_types=[plgpu.SMEM((floats,), f32), plgpu.SMEM((floats,), f32),
                     plgpu.Barrier(num_barriers=1)])
  return jax.jit(lambda: call()[0][:, 0])
