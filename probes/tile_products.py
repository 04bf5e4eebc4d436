"""What one product of ``tile_regression_mgpu`` costs on the tensor cores alone, in the form it
has and in a stacked one (Pallas Mosaic GPU, Hopper): its operands resident in shared memory,
no fetches, 128 CTAs of one warpgroup at once, as in the kernel.

  python -m probes.tile_products

A loop iteration is one half of a product (K = 128) of float32 operands, each in three
bfloat16 parts (``split3``), as the kernel takes it, in one of these forms:

  pairs      six wgmma of 64 x 64 x 128, one a product of parts in ``PAIRS`` (the kernel's form)
  first      the same six on the first parts only (wrong numbers: what distinct parts cost)
  stacked    B's three parts side by side (128 x 192): A0 [B0|B1|B2], A1 [B0|B1], A2 B0 into the
             column blocks of one (64, 192) accumulator (three wgmma of N 192, 128, 64), the
             blocks added in float32
  stacked_t  the same with B's parts stacked as rows (192 x 128) and taken transposed, as the
             kernel's products with B transposed would hold them

and, each CTA fetching its operands' parts from global memory (L2) by TMA in an iteration, as
the kernel's product phases did until 2026-12-06c (two halves of K = 64, the first half's
products running as the second lands; 96 KB a CTA, half a product of the kernel's):

  fetch+pairs    that form
  fetch          the fetches only
  fetch+first    the products all on the first parts, all three fetched
  fetch1+first   the same, only the first parts fetched

The cost of an iteration is the difference between launches of 1,100 and 100 iterations over
1,000 (median of ``--repeats`` each), so the launch drops out; each form's result is checked
against float64.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from jax import lax
from jax.experimental import pallas as pl

from jaxshallow.run import cli
from pallas_kernels import common
from pallas_kernels.fused import tile_regression_mgpu
from pallas_kernels.ops.dense_mgpu import split3
from probes import hopper

_REPEATS = flags.DEFINE_integer("repeats", 7, "Timed launches of each (median).")

T, K, CTAS = 64, 128, 128
SHORT, LONG = 100, 1_100
FORMS = ("pairs", "first", "stacked", "stacked_t")
FETCHED = ("fetch+pairs", "fetch", "fetch+first", "fetch1+first")


def probe(form: str, iterations: int):
  """A jitted kernel of ``iterations`` iterations of ``form``; returns CTA 0's sum of the
  iterations' (64, 64) results."""
  from jax.experimental.pallas import mosaic_gpu as gpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  swizzled = tile_regression_mgpu._swizzled()  # the kernel's operands' transforms
  scratch = [[gpu.SMEM((T, K), bf16, transforms=swizzled)] * 3,
             [gpu.SMEM((K, T), bf16, transforms=swizzled)] * 3,
             gpu.SMEM((K, 3 * T), bf16, transforms=swizzled),
             gpu.SMEM((3 * T, K), bf16, transforms=swizzled),
             gpu.Barrier(num_barriers=8)]

  @functools.partial(gpu.kernel, out_type=jax.ShapeDtypeStruct((CTAS, T, T), f32), grid=(CTAS,),
                     grid_names=("cta",), scratch_types=scratch)
  def kernel(a_in, b_in, bs_in, bst_in, out, a, b, bs, bst, loaded):
    for i in range(3):
      gpu.copy_gmem_to_smem(a_in.at[i], a[i], loaded.at[i])
      gpu.copy_gmem_to_smem(b_in.at[i], b[i], loaded.at[3 + i])
    gpu.copy_gmem_to_smem(bs_in, bs, loaded.at[6])
    gpu.copy_gmem_to_smem(bst_in, bst, loaded.at[7])
    for i in range(8):
      gpu.barrier_wait(loaded.at[i])

    def pairs(acc):
      for i, j in common.SPLIT3_PAIRS:
        if form == "first":
          i, j = 0, 0
        gpu.wgmma(acc, a[i], b[j])
      gpu.wgmma_wait(0)
      return acc[...]

    def stacked(acc):
      def cols(n):  # B's first n column blocks
        if form == "stacked":
          return bs.at[:, pl.ds(0, n * T)]
        return bst.at[pl.ds(0, n * T)].transpose((1, 0))
      gpu.wgmma(acc, a[0], cols(3))
      gpu.wgmma(acc.at[:, pl.ds(T, 2 * T)], a[1], cols(2))
      gpu.wgmma(acc.at[:, pl.ds(2 * T, T)], a[2], cols(1))
      gpu.wgmma_wait(0)
      return (acc[:, pl.ds(2 * T, T)] + acc[:, pl.ds(T, T)]) + acc[:, pl.ds(0, T)]

    def iteration(_, total):
      if form in ("pairs", "first"):
        return total + pl.run_scoped(pairs, gpu.ACC((T, T), f32))
      return total + pl.run_scoped(stacked, gpu.ACC((T, 3 * T), f32))

    zeros = gpu.layout_cast(jnp.zeros((T, T), f32), gpu.Layout.WGMMA)
    out[lax.axis_index("cta")] = lax.fori_loop(0, iterations, iteration, zeros)

  return jax.jit(kernel)


def fetched_probe(form: str, iterations: int):
  """As ``probe``, each iteration fetching both halves of the operands' parts first."""
  from jax.experimental.pallas import mosaic_gpu as gpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  swizzled = tile_regression_mgpu._swizzled()
  half = K // 2
  parts = 1 if form == "fetch1+first" else 3
  scratch = [[[gpu.SMEM((T, half), bf16, transforms=swizzled)] * 3 for _ in range(2)],
             [[gpu.SMEM((half, T), bf16, transforms=swizzled)] * 3 for _ in range(2)],
             gpu.Barrier(num_barriers=12)]

  @functools.partial(gpu.kernel, out_type=jax.ShapeDtypeStruct((CTAS, T, T), f32), grid=(CTAS,),
                     grid_names=("cta",), scratch_types=scratch)
  def kernel(a_in, b_in, out, a, b, mb):
    c = lax.axis_index("cta")

    def run(acc):
      for h in range(2):  # as tile_regression_mgpu's fetch_operands
        k = pl.ds(h * half, half)
        for i in range(parts):
          gpu.copy_gmem_to_smem(a_in.at[c, i, :, k], a[h][i], mb.at[3 * h + i])
          gpu.copy_gmem_to_smem(b_in.at[c, i, k], b[h][i], mb.at[6 + 3 * h + i])
      for h in range(2):
        for i in range(parts):
          gpu.barrier_wait(mb.at[3 * h + i])
          gpu.barrier_wait(mb.at[6 + 3 * h + i])
        if form != "fetch":
          for i, j in common.SPLIT3_PAIRS:
            if form != "fetch+pairs":
              i, j = 0, 0
            gpu.wgmma(acc, a[h][i], b[h][j])
      gpu.wgmma_wait(0)
      return acc[...]

    def iteration(_, total):
      return total + pl.run_scoped(run, gpu.ACC((T, T), f32))

    zeros = gpu.layout_cast(jnp.zeros((T, T), f32), gpu.Layout.WGMMA)
    out[c] = lax.fori_loop(0, iterations, iteration, zeros)

  return jax.jit(kernel)


def operands(rng):
  a = rng.standard_normal((T, K)).astype(np.float32)
  b = rng.standard_normal((K, T)).astype(np.float32)
  ap, bp = jnp.stack(split3(jnp.asarray(a))), jnp.stack(split3(jnp.asarray(b)))
  bs = jnp.concatenate(list(bp), axis=1)  # (K, 3T)
  bst = jnp.concatenate([p.T for p in bp], axis=0)  # (3T, K)
  return (a, b), (ap, bp, bs, bst)


def main(argv):
  del argv
  cli.at_least("repeats", _REPEATS.value, 1)
  d = hopper.require_hopper("tile_products")
  (a, b), args = operands(np.random.default_rng(0))
  want = SHORT * (a.astype(np.float64) @ b.astype(np.float64))
  print(f"device {d.device_kind}; jax {jax.__version__}; {CTAS} CTAs of one warpgroup; an "
        f"iteration: one product of 64 x 64 x {K} in bfloat16 parts; median of "
        f"{_REPEATS.value} launches")
  print(f"{'form':>12s} {'us/iter':>8s} {'max rel err':>11s}")

  def report(build, form, inputs):  # one form: CTA 0's result against float64, and timed
    short, long_run = build(form, SHORT), build(form, LONG)
    got = np.asarray(short(*inputs)[0], np.float64)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    us = hopper.us_per_step(lambda: short(*inputs), lambda: long_run(*inputs), SHORT, LONG,
                            _REPEATS.value)
    print(f"{form:>12s} {us:8.3f} {err:11.2e}", flush=True)
  for form in FORMS:
    report(probe, form, args)
  ap, bp = args[:2]  # each CTA its own copy: 12.6 MB, in L2
  fetched = (jnp.broadcast_to(ap, (CTAS,) + ap.shape), jnp.broadcast_to(bp, (CTAS,) + bp.shape))
  for form in FETCHED:
    report(fetched_probe, form, fetched)


if __name__ == "__main__":
  cli.run(main)
