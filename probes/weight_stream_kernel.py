"""The kernels of ``probes.weight_stream`` (apart from its flags, so that tests can import them
beside other scripts' flags): a population kernel's weight stream, its tile work in two forms.
The probe's docstring says what each measures."""

import jax
import jax.numpy as jnp
from jax import lax

T = 64  # A tile's rows: wgmma's M and K, the batch
SCOPES = ("fetch", "wait_in", "gradient", "update", "parts", "forward", "send", "step_end")


def tile_at(k, s, tiles: int, reverse: bool):
  """The walk's k-th tile at step s: k, or with ``reverse`` on odd steps tiles - 1 - k."""
  return k + lax.rem(s, 2) * (tiles - 1 - 2 * k) if reverse else k


def stream(ctas: int, rows: int, cols: int, steps: int, products: bool, x: str = "held",
           work: str = "all", profile_dir: str | None = None, reverse: bool = False):
  """A jitted launch of ``steps`` steps over each CTA's (rows, cols) block, and its argument
  (x's batches); ``x`` as the flag; ``profile_dir`` adds Mosaic GPU's profiler (``SCOPES``);
  ``reverse``: odd steps walk the tiles last to first."""
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
      def at(k):
        return tile_at(k, s, tiles, reverse)

      def run(acc):
        kept = h  # What the step computes, summed: nothing dropped
        fetch(at(0), 0)
        for k in range(tiles):
          slot = k % 2
          with jax.named_scope("fetch"):
            if k + 1 < tiles:  # once tile k - 1's forward products and store read the slot
              plgpu.wgmma_wait(0)
              plgpu.wait_smem_to_gmem(0, wait_read_only=True)
              fetch(at(k + 1), 1 - slot)
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
            plgpu.copy_smem_to_gmem(wbuf.at[slot], w_ref.at[c, pl.ds(at(k) * T, T)])
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
