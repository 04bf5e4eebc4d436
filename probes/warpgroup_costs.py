"""What cluster_mlp_mgpu's pieces cost alone, on one warpgroup a CTA (Pallas Mosaic GPU,
Hopper): the measurement behind where cluster_mlp_mgpu's step goes, in
docs/design/cluster_kernels.md.

  python -m probes.warpgroup_costs

A loop iteration does what one step of ``pallas_kernels.fused.cluster_mlp_mgpu`` does with one of
its pieces, over W0's thirteen tiles of 64 inputs (K = 64 each, so 4 wgmma instructions a tile):

  forward  x (64, 64) @ W0's parts side by side (64, N), accumulated over the tiles, one wait
  backward x^T @ dz's parts (64, N) a tile, each waited for (the kernel updates W0's tile next)
  update   the backward, then its (64, 16) result split in three bfloat16 parts
           (``dense_mgpu.split3``) and stored side by side into a swizzled buffer, as the
           kernel stores W0's new parts
  update+tma  the same, and the tile of x fetched again by TMA behind it, as the kernel
           fetches the next batch

N is 16 x parts: 48 in float32, 32 in tf32, 16 in bfloat16. 16 CTAs run at once (grid, no
cluster). The cost of an iteration is the difference between launches of 1,100 and 100
iterations over 1,000 (median of ``--repeats`` each), so the launch drops out; each product's
result is checked against numpy.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from jax import lax
from jax.experimental import pallas as pl

from jaxshallow.run import cli
from pallas_kernels.ops.dense_mgpu import split3
from probes import hopper

_REPEATS = flags.DEFINE_integer("repeats", 7, "Timed launches of each (median).")

TILES = 13
SHORT, LONG = 100, 1_100


def probe(piece: str, n: int, iterations: int):
  """A jitted kernel of ``iterations`` loop iterations of ``piece`` with products of width n;
  returns the sum of the products' (64, n) results over the iterations (CTA 0's)."""
  from jax.experimental.pallas import mosaic_gpu as gpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  swizzled = (gpu.TilingTransform((8, 16)), gpu.SwizzleTransform(32))  # as in cluster_mlp_mgpu
  stores = piece.startswith("update")
  scratch = [gpu.SMEM((TILES, 64, 64), bf16, transforms=swizzled),
             gpu.SMEM((TILES * 64, n), bf16, transforms=swizzled),
             gpu.Barrier(num_barriers=2)]
  if stores:  # Two tiles of W0's parts (where they go does not change the cost).
    scratch += [gpu.SMEM((2 * 64, 48), bf16, transforms=swizzled),
                gpu.Barrier(num_arrivals=TILES)]

  @functools.partial(gpu.kernel, out_type=jax.ShapeDtypeStruct((64, n), f32), grid=(16,),
                     grid_names=("cta",), scratch_types=scratch)
  def kernel(x_in, w_in, out, x, w, loaded, *update_refs):
    gpu.copy_gmem_to_smem(x_in, x, loaded.at[0])
    gpu.copy_gmem_to_smem(w_in, w, loaded.at[1])
    gpu.barrier_wait(loaded.at[0])
    gpu.barrier_wait(loaded.at[1])

    def forward(acc):
      for j in range(TILES):
        gpu.wgmma(acc, x.at[j], w.at[pl.ds(64 * j, 64)])
      gpu.wgmma_wait(0)
      return acc[...]

    def backward_tile(j, acc):
      gpu.wgmma(acc, x.at[j].transpose((1, 0)), w.at[pl.ds(64 * j, 64)])
      gpu.wgmma_wait(0)
      return acc[...]

    def iteration(i, total):
      if piece == "forward":
        return total + pl.run_scoped(forward, gpu.ACC((64, n), f32))
      parts, fetched = update_refs if stores else (None, None)
      for j in range(TILES):
        grad = pl.run_scoped(functools.partial(backward_tile, j), gpu.ACC((64, n), f32))
        if stores:
          if piece == "update+tma":
            gpu.copy_gmem_to_smem(x_in.at[j], x.at[j], fetched)
          for p, bits in enumerate(split3(grad[:, :16])):
            parts.at[pl.ds(64 * (j % 2), 64), pl.ds(16 * p, 16)][...] = bits
        total = total + grad
      if stores:
        gpu.commit_smem()
      if piece == "update+tma":
        gpu.barrier_wait(fetched)
      return total

    zeros = gpu.layout_cast(jnp.zeros((64, n), f32), gpu.Layout.WGMMA)  # the results' layout
    out[...] = lax.fori_loop(0, iterations, iteration, zeros)

  return jax.jit(kernel)


def expected(piece: str, x, w, iterations: int):
  x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
  tiles = [(x[j].T if piece != "forward" else x[j]) @ w[64 * j:64 * (j + 1)]
           for j in range(TILES)]
  return iterations * sum(tiles)


def main(argv):
  del argv
  cli.at_least("repeats", _REPEATS.value, 1)
  d = hopper.require_hopper("warpgroup_costs")
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.integers(0, 3, (TILES, 64, 64)), jnp.bfloat16)
  print(f"device {d.device_kind}; jax {jax.__version__}; 16 CTAs of one warpgroup; "
        f"{TILES} tiles of K = 64 an iteration; median of {_REPEATS.value} launches")
  print(f"{'piece':>11s} {'N':>3s} {'us/iter':>8s} {'ns/wgmma':>8s} {'right':>5s}")
  for piece in ("forward", "backward", "update", "update+tma"):
    for n in ((48, 32, 16) if piece in ("forward", "backward") else (48,)):
      w = jnp.asarray(rng.integers(0, 3, (TILES * 64, n)), jnp.bfloat16)
      short, long_run = probe(piece, n, SHORT), probe(piece, n, LONG)
      right = np.array_equal(np.asarray(short(x, w), np.float64), expected(piece, x, w, SHORT))
      us = hopper.us_per_step(lambda: short(x, w), lambda: long_run(x, w), SHORT, LONG,
                              _REPEATS.value)
      print(f"{piece:>11s} {n:3d} {us:8.3f} {1e3 * us / (4 * TILES):8.1f} {str(right):>5s}",
            flush=True)


if __name__ == "__main__":
  cli.run(main)
