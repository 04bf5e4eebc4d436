"""The MLP 784-256-1024-256-10's epoch on resident weight tiles: 132 CTAs that meet at grid
barriers (Pallas Mosaic GPU, Hopper), every product a 64 x 64 tile with K = 64.

The network is 784 -> 256 (ReLU) -> 1024 (ReLU) -> 256 (ReLU) -> 10 with biases, softmax
cross-entropy and plain SGD, batch 64: the breadth grid's three-hidden-layer MLP. At batch 64
every weight gradient is a product with K = 64 (the batch), so each weight tile of 64 x 64 can
stay, as float32 and as its three bfloat16 parts, in the one CTA that computes its gradient:
no weight moves. The forward products are split over K by those tiles, and the next phase adds
their float32 partials in a fixed order. Tiles: W0 13 x 4 (the 784 inputs padded to 832), W1
4 x 16, W2 16 x 4, W3 4 x 1 (the 10 classes padded to 64). CTAs 0-63 own a tile of W1 each
(q, n2), 64-127 a tile of W2 (n2, n3), 64-115 also one of W0 (k, n1), 128-131 one of W3 (n3).
A step, its phases apart by grid barriers:

  A  (W0's 52) the partial of z1[:, n1] over inputs k: x[:, k] W0[k, n1] (x's pixels exact in
     one bfloat16 part: three products, scaled by 1/255)
  B  (W1's 64) z1[:, q] from its 13 partials and b0; h1's parts kept; the partial of z2[:, n2]
     over q
  C  (W2's 64) z2[:, n2] from its 4 partials and b1; h2's parts kept; the partial of z3[:, n3]
  D  (W3's 4) z3[:, n3] from its 16 partials and b2; h3's parts kept; the partial logits
  E  (W3's 4, each the same bits) the logits from the 4 partials and b3, the loss, dL/dlogits;
     dh3 = dlogits W3[n3]^T, dz3; W3's tile, b3 and b2[n3] updated; dz3's parts out
  G  (W2's 64) dW2[n2, n3] = h2[:, n2]^T dz3[:, n3], W2's tile updated; the partial of dh2
  H  (W1's 64) dz2[:, n2] from its 4 partials; dW1[q, n2], W1's tile updated, b1; the partial
     of dh1
  I  (W0's 52) dz1[:, n1] from its 16 partials; dW0[k, n1] = x[:, k]^T dz1 / 255, W0's tile
     updated, b0; then the next step's A

Seven grid barriers a step. In E, G and H a CTA arrives at the barrier as soon as its partial
(or dz3) is out, and updates its weight tile while the others arrive. Products keep float32's accuracy: each operand in three bfloat16
parts (exact), the six products of parts above float32's rounding (``PAIRS``), the smallest
first; the pixels, integers, in one part. Sums over CTAs run in fixed orders, nothing uses
atomics for floats: every run gives the same bits.

GPU only: Mosaic GPU's interpreter cannot run the global semaphore; the CPU tests lower it and
check ``reference``, its plain-jnp twin, against float64.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import common
from pallas_kernels.mgpu import descriptors, grid_barrier
from pallas_kernels.ops.dense_mgpu import load as _load, split3_in_kernel, store as _store

BATCH = 64
WIDTHS = (784, 256, 1024, 256, 10)
T = 64  # A tile's side: wgmma's M, the batch, and 64 bfloat16 = 128-byte rows
INPUTS = 832  # 784 padded to 13 tiles
K0, N1, N2, N3 = INPUTS // T, 256 // T, 1024 // T, 256 // T  # Tiles along each layer
CTAS = 132  # W1's 64, W2's 64 (52 of them W0's too), W3's 4
W2_FIRST, W3_FIRST = 64, 128
# The jax versions it was checked with on a GPU against float64 (check_kernels --only=tile_mlp,
# H200, 2026-11-28: 0.11.2 and 0.12.0.1); with others (it lowers with jax 0.10 too) the epoch
# path takes the grid epoch kernel.
CHECKED = ((0, 11), (0, 12))
SLOTS = 4  # Partials fetched at once
PAIRS = common.SPLIT3_PAIRS
X_PAIRS = ((0, 2), (0, 1), (0, 0))  # The pixels, one part, against three
BARRIERS_PER_STEP = 7
# mbarriers: the partials (SLOTS), an operand's parts (3), a vector, x, the one-hot labels
MB_SLOT, MB_OP, MB_VEC, MB_X, MB_Y, MB_INIT = 0, SLOTS, SLOTS + 3, SLOTS + 4, SLOTS + 5, SLOTS + 6
MBARRIERS = SLOTS + 10
# Each product's wgmma descriptors built where it runs (``descriptors``), not before the step's
# loop, as the regression phase kernels' were (in their dumped PTX, what held them at 255
# registers: docs/bench/2026-12-07_ptx). The same bits, 47.6 us a step against 48.7 (H100, jax
# 0.11.2, 2026-12-07: docs/bench/2026-12-07b_h100). On by default with the jax versions it was
# checked with on a GPU (``descriptors.CHECKED``: jax 0.11, and 0.12 since 2026-12-07g).
FRESH_DESCRIPTORS = descriptors.checked()


def problem(widths, batch: int, *, bias: bool, optimizer: str, dtype) -> str | None:
  """Why this kernel cannot train the network (one line), or None if it can."""
  if not bias:
    return "it trains the MLP with biases"
  return common.phase_kernel_problem(
      widths, batch, want_widths=WIDTHS, want_batch=BATCH, checked=CHECKED, ctas=CTAS,
      bias=False, optimizer=optimizer, dtype=dtype)


def _block(i):  # Tile i along an axis (a traced i said to be a multiple of T)
  return pl.ds(i * T if isinstance(i, int) else pl.multiple_of(i * T, T), T)


def _kernel(w0_in, b0_in, w1_in, b1_in, w2_in, b2_in, w3_in, b3_in, x_in, y_in, pad_in,
            w0_o, w1_o, w2_o, w3_o, b2_o, b3_o, b0_g, b1_g, met_o,
            p0_g, z1_g, p1_g, z2_g, p2_g, p3_g, dz3_g, q2_g, q1_g,
            wa_m, wa_p, wb_m, wb_p, keep, xk, vec, vec2, vec3, mb, *zero_s, steps: int,
            lr: float):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16, wgmma_layout = jnp.float32, jnp.bfloat16, plgpu.Layout.WGMMA
  swizzled = _swizzled()
  by_col = plgpu.Layout.WGMMA.reduce(0)
  counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))
  descriptors.put_zero(zero_s)  # (``FRESH_DESCRIPTORS``)
  c = lax.axis_index("cta")
  is_w1 = c < W2_FIRST
  is_w2 = jnp.logical_and(c >= W2_FIRST, c < W3_FIRST)
  is_w0 = jnp.logical_and(c >= W2_FIRST, c < W2_FIRST + K0 * N1)
  is_w3 = c >= W3_FIRST
  d = c - W2_FIRST
  q, n2 = lax.div(c, N2), lax.rem(c, N2)  # W1[q, n2]
  m2, m3 = lax.div(d, N3), lax.rem(d, N3)  # W2[m2, m3]
  k0, n1 = lax.div(d, N1), lax.rem(d, N1)  # W0[k0, n1]
  n3 = c - W3_FIRST  # W3[n3]

  def rows_of(v):
    return lax.broadcast_in_dim(v, (T, T), [0])

  def cols_of(v):
    return lax.broadcast_in_dim(v, (T, T), [1])

  def fetch(src, dst, slot):
    plgpu.copy_gmem_to_smem(src, dst, mb.at[slot])

  def wait(slot, n=1):
    for i in range(n):
      plgpu.barrier_wait(mb.at[slot + i])

  def send(pairs):  # (shared, global) copies out, waited for: then the barrier may pass
    with jax.named_scope("send"):
      plgpu.commit_smem()
      for src, dst in pairs:
        plgpu.copy_smem_to_gmem(src, dst)
      plgpu.wait_smem_to_gmem(0)

  def meet(k):
    arrive()
    meet_after_arrival(k)

  def arrive():  # A barrier's first half: this CTA's phase is out
    with jax.named_scope("barrier"):
      grid_barrier.arrive(counter.at[0])

  def meet_after_arrival(k, arrived=None):  # The k-th barrier's second half; CTAs where
    # ``arrived`` is false arrive first (the others arrived early, their partial out, and
    # updated their weight tile meanwhile)
    if arrived is not None:
      pl.when(jnp.logical_not(arrived))(arrive)
    with jax.named_scope("barrier"):
      grid_barrier.wait(counter.at[0], k * CTAS)
      grid_barrier.fence_for_copies()

  def put(value, refs):  # value's three bfloat16 parts into three refs
    for ref, part in zip(refs, split3_in_kernel(value, ptx=True)):
      ref[...] = part

  def product(a, b, pairs=PAIRS, ta=False, tb=False):  # sum of a_i b_j over pairs (64 x 64)
    with jax.named_scope("product"):
      return _product(a, b, pairs, ta, tb)

  def _product(a, b, pairs, ta, tb):
    def run(acc):
      zero = descriptors.read(zero_s)  # (``FRESH_DESCRIPTORS``)
      for i, j in pairs:
        plgpu.wgmma(acc, descriptors.operand(a[i], zero, ta),
                    descriptors.operand(b[j], zero, tb))
      plgpu.wgmma_wait(0)
      return acc[...]
    return pl.run_scoped(run, plgpu.ACC((T, T), f32))

  def total(slots, src, n):  # src(i) for i < n, (64, 64) float32 partials, added in i order,
    # SLOTS in flight: each slot fetched again as soon as it was read
    with jax.named_scope("partials"):
      return _total(slots, src, n)

  def _total(slots, src, n):
    for i in range(min(SLOTS, n)):
      fetch(src(i), slots.at[i], MB_SLOT + i)
    out = None
    for i in range(n):
      slot = i % SLOTS
      wait(MB_SLOT + slot)
      v = _load(slots.at[slot], wgmma_layout)
      out = v if out is None else out + v
      if i + SLOTS < n:
        plgpu.commit_smem()  # The slot was read: now a copy may write it again
        fetch(src(i + SLOTS), slots.at[slot], MB_SLOT + slot)
    return out

  def parts3():
    return [plgpu.SMEM((T, T), bf16, transforms=swizzled)] * 3

  def update(master, parts, grad):  # A resident weight tile less lr grad, and its parts
    w = _load(master, wgmma_layout) - lr * grad
    _store(master, w)
    put(w, parts)

  def update_bias(ref, src, dst, grad):  # A bias block in global memory (src -> dst), lr grad
    fetch(src, ref, MB_VEC)
    wait(MB_VEC)
    ref[...] = _load(ref, by_col) - lr * grad
    send([(ref, dst)])

  # Before the first step: each CTA's resident tiles, the biases in their global buffers.
  def resident(src, master, parts):
    fetch(src, master, MB_INIT)
    wait(MB_INIT)
    put(_load(master, wgmma_layout), parts)

  @pl.when(is_w1)
  def _():
    resident(w1_in.at[_block(q), _block(n2)], wa_m, wa_p)

  @pl.when(is_w2)
  def _():
    resident(w2_in.at[_block(m2), _block(m3)], wa_m, wa_p)

  @pl.when(is_w0)
  def _():
    resident(w0_in.at[_block(k0), _block(n1)], wb_m, wb_p)

    @pl.when(k0 == 0)
    def _():
      fetch(b0_in.at[_block(n1)], vec, MB_VEC)
      wait(MB_VEC)
      send([(vec, b0_g.at[_block(n1)])])

  @pl.when(is_w3)
  def _():
    resident(w3_in.at[_block(n3)], wa_m, wa_p)
    fetch(b2_in.at[_block(n3)], vec2, MB_VEC)  # b2[n3] and b3 kept here
    wait(MB_VEC)
    fetch(b3_in, vec3, MB_VEC)
    wait(MB_VEC)

  @pl.when(jnp.logical_and(is_w1, q == 0))
  def _():
    fetch(b1_in.at[_block(n2)], vec, MB_VEC)
    wait(MB_VEC)
    send([(vec, b1_g.at[_block(n2)])])

  def phase_a(s):  # x[s][:, k0] (fetched) times W0's tile: a partial of z1
    def run(stage):
      plgpu.commit_smem()  # W0's parts, stored by the threads, before the tensor cores read them
      wait(MB_X)
      _store(stage, product([xk], wb_p, X_PAIRS) * (1.0 / 255.0))
      send([(stage, p0_g.at[k0, :, _block(n1)])])
    pl.run_scoped(run, plgpu.SMEM((T, T), f32))

  @pl.when(is_w0)
  def _():
    fetch(x_in.at[0, :, _block(k0)], xk, MB_X)
    phase_a(0)
  meet(1)

  def step(s, carry):
    k = 1 + BARRIERS_PER_STEP * s

    def forward(partials, n, bias, out, keep_z, bias_src=None):  # A hidden layer's tile: z
      # from its n partials and the bias (fetched from bias_src() into ``bias`` where given),
      # ``keep_z(z, stage)``; relu(z)'s parts kept; the partial of the next layer (this CTA's
      # weight tile) out to out(). (Global refs as functions: their offsets computed where
      # they are used.)
      def run(slots, stage):
        if bias_src is not None:
          fetch(bias_src(), bias, MB_VEC)
        z = total(slots, partials, n)
        if bias_src is not None:
          wait(MB_VEC)
        z = z + cols_of(_load(bias, by_col))
        keep_z(z, stage)
        put(jnp.maximum(z, 0.0), keep)
        plgpu.commit_smem()
        _store(stage, product(keep, wa_p))
        send([(stage, out())])
      pl.run_scoped(run, plgpu.SMEM((SLOTS, T, T), f32), plgpu.SMEM((T, T), f32))

    def z_out(index, dst):  # keep_z: a unit block's CTA of index 0 sends z (for relu's mask)
      def keep_z(z, stage):
        @pl.when(index == 0)
        def _():
          _store(stage, z)
          send([(stage, dst())])
      return keep_z

    # B: z1[:, q] = its 13 partials + b0; h1's parts kept; the partial of z2 over q out.
    pl.when(is_w1)(lambda: forward(
        lambda i: p0_g.at[i, :, _block(q)], K0, vec, lambda: p1_g.at[q, :, _block(n2)],
        z_out(n2, lambda: z1_g.at[:, _block(q)]), bias_src=lambda: b0_g.at[_block(q)]))
    meet(k + 1)

    # C: z2[:, m2] = its 4 partials + b1; h2's parts kept; the partial of z3 over m2 out.
    pl.when(is_w2)(lambda: forward(
        lambda i: p1_g.at[i, :, _block(m2)], N1, vec, lambda: p2_g.at[m2, :, _block(m3)],
        z_out(m3, lambda: z2_g.at[:, _block(m2)]), bias_src=lambda: b1_g.at[_block(m2)]))
    meet(k + 2)

    # D: z3[:, n3] = its 16 partials + b2[n3] (kept here: vec2), z3 kept in wb_m (these CTAs
    # own no W0 tile); h3's parts kept; the partial logits out.
    pl.when(is_w3)(lambda: forward(
        lambda i: p2_g.at[i, :, _block(n3)], N2, vec2, lambda: p3_g.at[n3],
        lambda z, stage: _store(wb_m, z)))
    meet(k + 3)

    # E: the logits, loss and dL/dlogits (the four CTAs the same bits); dz3[:, n3]'s parts out;
    # W3's tile, b2[n3] and b3 updated.
    @pl.when(is_w3)
    def _():
      def run(slots, loss, hit, onehot, pad, dl):
        fetch(y_in.at[s], onehot, MB_Y)
        fetch(pad_in, pad, MB_VEC)
        logits = total(slots, lambda i: p3_g.at[i], N3) + cols_of(_load(vec3, by_col))
        wait(MB_Y)
        wait(MB_VEC)
        labels = _load(onehot, wgmma_layout)
        masked = logits + cols_of(_load(pad, by_col))  # -1e30 in the padded classes
        top = jnp.max(masked, axis=1)
        e = jnp.exp(masked - rows_of(top))
        sums = jnp.sum(e, axis=1)
        picked = jnp.sum(labels * masked, axis=1)
        dlogits = (e / rows_of(sums) - labels) * (1.0 / BATCH)

        @pl.when(n3 == 0)
        def _():
          loss[...] = jnp.log(sums) + top - picked
          hit[...] = jnp.where(picked >= top, 1.0, 0.0)
          send([(loss, met_o.at[s, 0]), (hit, met_o.at[s, 1])])
        put(dlogits, dl)
        plgpu.commit_smem()
        dh3 = product(dl, wa_p, tb=True)  # dlogits W3[n3]^T, before W3's update
        dz3 = jnp.where(_load(wb_m, wgmma_layout) > 0.0, dh3, 0.0)
        put(dz3, wb_p)  # (these CTAs own no W0 tile: its parts' buffers hold dz3's)
        send([(wb_p[i], dz3_g.at[i, :, _block(n3)]) for i in range(3)])
        arrive()  # Then the last layer's update, while the others arrive
        vec2[...] = _load(vec2, by_col) - lr * jnp.sum(dz3, axis=0)
        vec3[...] = _load(vec3, by_col) - lr * jnp.sum(dlogits, axis=0)
        update(wa_m, wa_p, product(keep, dl, ta=True))
      pl.run_scoped(run, plgpu.SMEM((SLOTS, T, T), f32), plgpu.SMEM((T,), f32),
                    plgpu.SMEM((T,), f32), plgpu.SMEM((T, T), f32), plgpu.SMEM((T,), f32),
                    parts3())
    meet_after_arrival(k + 4, is_w3)

    # G: dW2[m2, m3] = h2[:, m2]^T dz3[:, m3]; the partial of dh2[:, m2] over m3 out; W2's tile
    # updated.
    @pl.when(is_w2)
    def _():
      def run(stage, dz):
        for i in range(3):
          fetch(dz3_g.at[i, :, _block(m3)], dz[i], MB_OP + i)
        wait(MB_OP, 3)
        _store(stage, product(dz, wa_p, tb=True))  # dz3 W2[m2, m3]^T, before the update
        send([(stage, q2_g.at[m3, :, _block(m2)])])
        arrive()  # Then W2's update, while the others arrive
        update(wa_m, wa_p, product(keep, dz, ta=True))
      pl.run_scoped(run, plgpu.SMEM((T, T), f32), parts3())
    meet_after_arrival(k + 5, is_w2)

    # H: dz2[:, n2] from its 4 partials and z2; dW1[q, n2], W1's tile updated; b1 (q = 0); the
    # partial of dh1[:, q] over n2 out.
    @pl.when(is_w1)
    def _():
      def run(slots, stage, dz):
        fetch(z2_g.at[:, _block(n2)], stage, MB_Y)
        dh2 = total(slots, lambda i: q2_g.at[i, :, _block(n2)], N3)
        wait(MB_Y)
        dz2 = jnp.where(_load(stage, wgmma_layout) > 0.0, dh2, 0.0)
        put(dz2, dz)
        plgpu.commit_smem()
        _store(stage, product(dz, wa_p, tb=True))  # dz2 W1[q, n2]^T, before the update
        send([(stage, q1_g.at[n2, :, _block(q)])])
        arrive()  # Then W1's update and b1's, while the others arrive (b1 is read two
        # barriers later)
        update(wa_m, wa_p, product(keep, dz, ta=True))

        @pl.when(q == 0)
        def _():
          update_bias(vec, b1_g.at[_block(n2)], b1_g.at[_block(n2)], jnp.sum(dz2, axis=0))
      pl.run_scoped(run, plgpu.SMEM((SLOTS, T, T), f32), plgpu.SMEM((T, T), f32), parts3())
    meet_after_arrival(k + 6, is_w1)

    # I: dz1[:, n1] from its 16 partials and z1; dW0[k0, n1] = x^T dz1 / 255, W0's tile
    # updated; b0 (k0 = 0); then the next step's A.
    @pl.when(is_w0)
    def _():
      def run(slots, stage, dz):
        fetch(z1_g.at[:, _block(n1)], stage, MB_Y)
        dh1 = total(slots, lambda i: q1_g.at[i, :, _block(n1)], N2)
        wait(MB_Y)
        dz1 = jnp.where(_load(stage, wgmma_layout) > 0.0, dh1, 0.0)
        put(dz1, dz)
        plgpu.commit_smem()
        update(wb_m, wb_p, product([xk], dz, X_PAIRS, ta=True) * (1.0 / 255.0))

        @pl.when(k0 == 0)
        def _():
          update_bias(vec, b0_g.at[_block(n1)], b0_g.at[_block(n1)], jnp.sum(dz1, axis=0))
      pl.run_scoped(run, plgpu.SMEM((SLOTS, T, T), f32), plgpu.SMEM((T, T), f32), parts3())

      @pl.when(s + 1 < steps)
      def _():
        plgpu.commit_smem()  # x's last reads done: the copy may write it
        fetch(x_in.at[s + 1, :, _block(k0)], xk, MB_X)
        phase_a(s + 1)
    meet(k + 7)
    return carry

  lax.fori_loop(0, steps, step, 0)

  # The weights out: each tile from its owner.
  @pl.when(is_w1)
  def _():
    send([(wa_m, w1_o.at[_block(q), _block(n2)])])

  @pl.when(is_w2)
  def _():
    send([(wa_m, w2_o.at[_block(m2), _block(m3)])])

  @pl.when(is_w0)
  def _():
    send([(wb_m, w0_o.at[_block(k0), _block(n1)])])

  @pl.when(is_w3)
  def _():
    send([(wa_m, w3_o.at[_block(n3)]), (vec2, b2_o.at[_block(n3)])])

    @pl.when(n3 == 0)
    def _():
      send([(vec3, b3_o)])


def _swizzled():
  """The tensor cores' operands' transforms: tiles of 8 rows of 64 bfloat16, swizzled."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  return (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))


PHASES = ("barrier", "partials", "product", "send")  # The profiler's scopes (probes.tile_mlp)


@functools.lru_cache(maxsize=None)
def _call(steps: int, lr: float, profile_dir: str | None = None, fresh: bool = False):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32, bf16 = jnp.float32, jnp.bfloat16
  shape = jax.ShapeDtypeStruct
  swizzled = _swizzled()
  parts = [plgpu.SMEM((T, T), bf16, transforms=swizzled)] * 3
  params = {}
  if profile_dir:  # Scopes a step: 7 barriers, up to 8 partial sums and 9 products, 8 sends
    params.update(profile_space=40 * steps, profile_dir=profile_dir)
  return plgpu.kernel(
      functools.partial(_kernel, steps=steps, lr=lr),
      out_type=(shape((INPUTS, 256), f32), shape((256, 1024), f32), shape((1024, 256), f32),
                shape((256, T), f32), shape((256,), f32), shape((T,), f32),
                shape((256,), f32), shape((1024,), f32),  # b0, b1 (updated in place)
                shape((steps, 2, T), f32),  # each row's loss and whether it was right
                # The exchanges, read back and dropped.
                shape((K0, T, 256), f32), shape((T, 256), f32), shape((N1, T, 1024), f32),
                shape((T, 1024), f32), shape((N2, T, 256), f32), shape((N3, T, T), f32),
                shape((3, T, 256), bf16), shape((N3, T, 1024), f32), shape((N2, T, 256), f32)),
      grid=(CTAS,), grid_names=("cta",),
      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane,
                                           **params),
      scratch_types=[
          plgpu.SMEM((T, T), f32), parts,  # W1's, W2's or W3's tile
          plgpu.SMEM((T, T), f32), parts,  # W0's tile (W3's CTAs: z3)
          parts,  # h1's, h2's or h3's parts, from the forward to the weight's gradient
          plgpu.SMEM((T, T), bf16, transforms=swizzled),  # x's tile (integers)
          plgpu.SMEM((T,), f32), plgpu.SMEM((T,), f32), plgpu.SMEM((T,), f32),  # biases
          plgpu.Barrier(num_barriers=MBARRIERS),
      ] + descriptors.scratch(fresh))


def batches(x, labels, order, steps: int):
  """x (N, 784) uint8 pixels and labels (N,) gathered in ``order``: x (steps, 64, 832) in
  bfloat16 (integers, exact), the one-hot labels (steps, 64, 64) float32."""
  idx = order[:steps * BATCH]
  xs = jnp.pad(x[idx].astype(jnp.bfloat16), ((0, 0), (0, INPUTS - 784)))
  onehot = jax.nn.one_hot(labels[idx], T, dtype=jnp.float32)
  return xs.reshape(steps, BATCH, INPUTS), onehot.reshape(steps, BATCH, T)


def train_steps(params, xs, onehot, lr: float, profile_dir: str | None = None,
                fresh_descriptors: bool | None = None):
  """``steps`` SGD steps in one launch: params [{"w", "b"}] x 4 (784-256-1024-256-10), xs and
  onehot from ``batches``. Returns (params, losses (steps,), correct (steps,) int32).
  ``profile_dir`` adds Mosaic GPU's profiler (a few steps only); ``fresh_descriptors`` (default
  ``FRESH_DESCRIPTORS``) builds each product's operand descriptors where it runs."""
  steps = xs.shape[0]
  grid_barrier.check_resident_ctas(CTAS)
  (w0, b0), (w1, b1), (w2, b2), (w3, b3) = [(p["w"], p["b"]) for p in params]
  w0p = jnp.pad(w0, ((0, INPUTS - 784), (0, 0)))
  w3p = jnp.pad(w3, ((0, 0), (0, T - 10)))
  b3p = jnp.pad(b3, (0, T - 10))
  pad = jnp.where(jnp.arange(T) < 10, 0.0, -1e30).astype(jnp.float32)
  fresh = FRESH_DESCRIPTORS if fresh_descriptors is None else fresh_descriptors
  w0, w1, w2, w3, b2, b3, b0, b1, met, *_ = _call(steps, float(lr), profile_dir, fresh)(
      w0p, b0, w1, b1, w2, b2, w3p, b3p, xs, onehot, pad)
  params = [{"w": w0[:784], "b": b0}, {"w": w1, "b": b1}, {"w": w2, "b": b2},
            {"w": w3[:, :10], "b": b3[:10]}]
  losses = jax.vmap(common.fixed_order_mean)(met[:, 0])
  return params, losses, jnp.sum(met[:, 1], axis=1).astype(jnp.int32)


def reference(params, xs, onehot, lr: float):
  """The plain-jnp twin of ``train_steps``: the same steps, products at full precision, the
  partials over K tiles added in the kernel's orders."""
  hi = lax.Precision.HIGHEST
  dt = params[0]["w"].dtype

  def in_order(parts):
    return functools.reduce(jnp.add, [parts[i] for i in range(parts.shape[0])])

  def by_tiles(a, b, scale=1.0):  # a b, K in tiles of 64, each partial times scale, added in
    # tile order
    n = a.shape[1] // T
    return in_order(jnp.einsum("rqk,qkn->qrn", a.reshape(a.shape[0], n, T),
                               b.reshape(n, T, b.shape[1]), precision=hi) * scale)

  def step(carry, xy):
    (w0, b0), (w1, b1), (w2, b2), (w3, b3) = carry
    x, oh = xy
    x = x.astype(dt)
    z1 = by_tiles(x, w0, 1.0 / 255.0) + b0
    h1 = jnp.maximum(z1, 0.0)
    z2 = by_tiles(h1, w1) + b1
    h2 = jnp.maximum(z2, 0.0)
    z3 = by_tiles(h2, w2) + b2
    h3 = jnp.maximum(z3, 0.0)
    logits = by_tiles(h3, w3) + b3
    masked = jnp.where(jnp.arange(T) < 10, logits, -1e30)
    top = jnp.max(masked, axis=1)
    e = jnp.exp(masked - top[:, None])
    sums = jnp.sum(e, axis=1)
    loss = jnp.log(sums) + top - jnp.sum(oh * masked, axis=1)
    dlogits = (e / sums[:, None] - oh) / BATCH
    dz3 = jnp.where(z3 > 0, jnp.dot(dlogits, w3.T, precision=hi), 0.0)
    dz2 = jnp.where(z2 > 0, by_tiles(dz3, w2.T), 0.0)
    dz1 = jnp.where(z1 > 0, by_tiles(dz2, w1.T), 0.0)
    g = lambda a, b: jnp.dot(a.T, b, precision=hi)
    new = ((w0 - lr * (g(x, dz1) * (1.0 / 255.0)), b0 - lr * jnp.sum(dz1, 0)),
           (w1 - lr * g(h1, dz2), b1 - lr * jnp.sum(dz2, 0)),
           (w2 - lr * g(h2, dz3), b2 - lr * jnp.sum(dz3, 0)),
           (w3 - lr * g(h3, dlogits), b3 - lr * jnp.sum(dlogits, 0)))
    return new, (jnp.mean(loss), jnp.sum(jnp.where(jnp.sum(oh * masked, 1) >= top, 1, 0)))

  (w0, b0), (w1, b1), (w2, b2), (w3, b3) = [(p["w"], p["b"]) for p in params]
  carry = ((jnp.pad(w0, ((0, INPUTS - 784), (0, 0))), b0), (w1, b1), (w2, b2),
           (jnp.pad(w3, ((0, 0), (0, T - 10))), jnp.pad(b3, (0, T - 10))))
  carry, (losses, correct) = lax.scan(step, carry, (xs, onehot.astype(dt)))
  (w0, b0), (w1, b1), (w2, b2), (w3, b3) = carry
  params = [{"w": w0[:784], "b": b0}, {"w": w1, "b": b1}, {"w": w2, "b": b2},
            {"w": w3[:, :10], "b": b3[:10]}]
  return params, losses, correct.astype(jnp.int32)


def train_epoch(params, x, labels, order, lr: float, *, steps: int, use_kernel: bool):
  """One epoch: x (N, 784) uint8, labels (N,), order (>= steps * 64,). Returns (params, per-step
  losses, per-step correct counts). ``use_kernel``: the kernel (Hopper), else ``reference``."""
  xs, onehot = batches(x, labels, order, steps)
  run = train_steps if use_kernel else reference
  return run(params, xs, onehot, lr)
