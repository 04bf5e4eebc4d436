"""A whole epoch of MLP training in one kernel launch: forward, backward and update (SGD,
momentum or Adam) of every step, with the batches gathered from the uint8 data by the epoch's
order.

Why: a step of these small networks is under a microsecond of the chip's arithmetic, but an XLA
loop over steps pays more than that per iteration just to launch its kernels
(docs/design/epoch_kernels.md). Here the programs stay resident for the whole epoch, loop over
the steps themselves, and meet at grid-wide barriers where a step needs data that other programs
computed.

Layout. Layer l maps n_l inputs to n_{l+1} outputs; its weight matrix is cut into tiles of
``block_k`` rows (inputs) by ``block_n`` columns (output units). Tile t of a layer always belongs
to program t % P, so each weight tile (and its optimizer state) is stepped by one program only.
A step runs these phases, with a grid barrier between two:
  F_0       per tile: partial pre-activations x[:, k-tile] @ W_0[tile] into scratch
  F_l       per tile: the input tile a = relu(sum over k-tiles of layer l-1's partials + b), in a
            fixed order (every program that needs the same tile computes the same bits), then
            a @ W_l[tile] into scratch; the n-tile-0 program also stores a for the backward pass
  top       per tile of layer l = L-2 (of layer 0 if L = 1): the logits (or the regression
            output) summed in a fixed order, the loss and its gradient g, computed alike by
            every program; the owner of the last layer's rows that feed this tile's units steps
            them; g is taken down through those rows (read, not yet stepped) to this tile's
            units; then the tile's own step and its partial dA_l (if l > 0)
  B_l       per tile, l = L-3 .. 0: g = (sum of dA_{l+1}'s partials) * [a_{l+1} > 0]; dA_l (if
            l > 0); W_l -= lr * a_l^T g; the k-tile-0 program updates the bias
That is L + max(L - 2, 0) barriers a step (1, 2, 4 for depths 1, 2, 3). With two layers and
one k-tile in layer 0 (the regression nets' 32 inputs), F_0 and F_1 run as one phase
(``Plan.merged``): one barrier a step. The mse head's one output is exchanged as vectors of
rows, not as tiles of which one column is real. Most scratch needs no
double-buffering: it is next written at least one barrier after its last reader passed. The
exceptions alternate between two copies by step parity: the last layer's weights and bias
(read by every program in the phase where their owners step them) and its partial outputs
(read in the top phase, which runs into the next step's F_0 without a barrier when L = 1).
Sums run in fixed orders and nothing uses floating-point atomics, so every run gives the same
bits.

The batch rows are gathered in the epoch's order by one XLA gather before the launch, so a
step's loads need no index loaded first.

Two forms of the same phase code:
  ``epoch``         one ``pallas_call`` (GPU): a loop over steps, barriers between phases. All
                    programs must be resident at once, so P is at most the SM count.
  ``epoch_phases``  one ``pallas_call`` per phase and step (interpret mode, CPU tests): the call
                    boundary is the barrier, since interpret mode runs programs one by one and a
                    spin barrier would never open there.

The barrier (``grid_barrier``) uses the results of its atomics: the arrival's returned count
sets the spin's target, and the spin reads the counter with atomics whose results end the loop.
Written with discarded atomic results, or spinning on volatile loads with no acquire after,
data exchanged across it was read wrong (H100, jax 0.11.2); ``experiments.check_kernels``
stress-tests it on the device.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common
from pallas_kernels.fused.limits import MAX_BATCH, MAX_OUTPUTS  # noqa: F401 (the kernel's limits)
from pallas_kernels.ops.softmax_xent import row_stats, softmax_minus_onehot
HIDDEN_BLOCK = 16  # Units per tile of hidden layers (and inputs per tile of deeper layers).
# Where float32's products go to the tensor cores as bfloat16 parts (``Plan.split``): the MLP
# (softmax head) at 33 to 64 rows a step with a hidden layer of at least this many units: in
# tiles of 32 with more than one hidden layer, of 64 with one of 1024 units or more, of 16 with
# one of 512 to 1023. Measured on the H100 (docs/design/epoch_kernels.md): on the FMA units, in
# tiles of 16, the products were most of the step there. One layer of 512 gains only with the
# uint8 pixels as integers (``Plan.int_inputs``: 19.5 ms an epoch against 22.2 on the FMA units;
# split products of scaled pixels: none); at batch 128, 256 and 512 and for the regression nets
# the split products gained nothing.
SPLIT_FROM_UNITS = 512
# The optimizer state kept beside each weight and bias: momentum's velocity; Adam's first and
# second moments.
SLOTS = {"sgd": (), "momentum": ("v",), "adam": ("mu", "nu")}


def _optimizer(plan) -> str:
  return "adam" if plan.adam else "momentum" if plan.momentum else "sgd"


@dataclasses.dataclass(frozen=True)
class Plan:
  """The static shape of one epoch kernel (hashable: a static argument)."""
  widths: tuple[int, ...]  # n_0 (inputs) ... n_L (outputs)
  batch: int
  steps: int
  head: str  # "xent" (integer labels) or "mse" (one output, float targets), as Model.loss
  bias: bool
  momentum: bool
  programs: int
  precision: str = "float32"
  scale_u8: bool = True  # uint8 inputs are scaled to [0, 1]
  num_warps: int = 4
  input_block: int = 0  # Layer 0's block_k; 0 for the default below.
  adam: bool = False  # Adam (optax.adam's defaults, common.ADAM) instead of SGD or momentum.
  hidden_block: int = HIDDEN_BLOCK  # Units per tile of hidden layers (inputs of deeper ones).
  # float32's products on the tensor cores, as accurate: each operand as three bfloat16 parts
  # (``common.dot_split``). For float32 data only (float64 in the CPU tests takes IEEE products).
  split: bool = False
  # With split products, uint8 inputs enter layer 0's products as the integers they are (exact
  # in bfloat16: three products of W's parts, not six), scaled by 1/255 after (784-1024-10 on
  # the H100: 21.9 ms an epoch against 30.1). ``train_epoch`` drops it for other inputs.
  int_inputs: bool = False

  @property
  def products(self) -> str:
    """The precision of the tiles' products, as ``common.dot`` takes it."""
    return "split" if self.split else self.precision

  @property
  def kinds(self) -> tuple[str, ...]:
    """A layer's parameters: weights, and biases where the network has them."""
    return ("w", "b") if self.bias else ("w",)

  @property
  def layers(self) -> int:
    return len(self.widths) - 1

  @property
  def rows(self) -> int:  # The batch padded to a power of two (Triton tiles).
    return common.tile_side(self.batch)

  def block_k(self, l: int) -> int:
    if l > 0:
      return self.hidden_block
    if self.input_block:
      return self.input_block
    # Layer 0: as many input columns as keep a (rows, block_k) tile at 8K values.
    return max(16, min(128, 8192 // self.rows, pl.next_power_of_2(self.widths[0])))

  def block_n(self, l: int) -> int:
    if l == self.layers - 1:
      return common.tile_side(self.widths[-1])
    return self.hidden_block

  def k_tiles(self, l: int) -> int:
    return pl.cdiv(self.widths[l], self.block_k(l))

  def n_tiles(self, l: int) -> int:
    return pl.cdiv(self.widths[l + 1], self.block_n(l))

  def tiles(self, l: int) -> int:
    return self.k_tiles(l) * self.n_tiles(l)

  @property
  def merged(self) -> bool:
    """Two layers and one input tile per unit tile of layer 0: the program of layer 0's tile
    (0, nt) has its units' whole pre-activations, and owns the last layer's rows they feed
    (tile nt of both layers), so F_0 and F_1 run as one phase and a step needs one barrier."""
    return self.layers == 2 and self.k_tiles(0) == 1

  @property
  def vector_out(self) -> bool:
    """The mse head's one output: its partial sums are exchanged as vectors of rows."""
    return self.head == "mse"

  def work_per_program(self) -> float:
    """Multiply-adds of one pass (the forward products) per program, padding included."""
    return sum(self.tiles(l) * self.rows * self.block_k(l) * self.block_n(l)
               for l in range(self.layers)) / self.programs


def make_plan(widths, batch, steps, *, head="xent", bias=True, momentum=False,
              precision="float32", scale_u8=True, max_programs=132, adam=False,
              hidden_block=None, split=None, int_inputs=True) -> Plan:
  """The plan for these shapes; ValueError (one line) for what the kernel cannot hold.
  ``hidden_block`` and ``split``: None for ``tiles_for``'s choice; ``int_inputs`` applies to
  split products of scaled uint8 inputs only."""
  widths = tuple(int(w) for w in widths)
  if len(widths) < 2:
    raise ValueError(f"an MLP needs at least two widths, got {widths}")
  if batch > MAX_BATCH:
    raise ValueError(f"batch {batch} is over the epoch kernel's {MAX_BATCH} rows")
  if widths[-1] > MAX_OUTPUTS:
    raise ValueError(f"{widths[-1]} outputs are over the epoch kernel's {MAX_OUTPUTS}")
  if head == "mse" and widths[-1] != 1:
    raise ValueError("the mse head has one output")
  if momentum and adam:
    raise ValueError("momentum or adam, not both")
  auto_block, auto_split = tiles_for(widths, batch, head, precision)
  hidden_block = auto_block if hidden_block is None else hidden_block
  split = auto_split if split is None else split
  if split and precision != "float32":
    raise ValueError(f"split products are float32's, not {precision}'s")
  if hidden_block < 16 or hidden_block & (hidden_block - 1):
    raise ValueError(f"hidden_block must be a power of two of at least 16 (Triton's tiles), "
                     f"got {hidden_block}")
  plan = Plan(widths, batch, steps, head, bias, momentum, 1, precision, scale_u8, adam=adam,
              hidden_block=hidden_block, split=split,
              int_inputs=int_inputs and split and scale_u8 and head == "xent")
  # Layer 0's inputs per tile: the narrowest of 32, 64 and 128 that still gives every program
  # one tile at most, so that more SMs share the products. Narrower (more partial sums for the
  # next phase to add) was slower: softmax regression ran fastest at 32 (25 programs), slowest
  # at 16 (49 programs) (docs/design/epoch_kernels.md).
  for block in (32, 64, 128):
    narrower = dataclasses.replace(plan, input_block=block)
    if block <= plan.block_k(0) and narrower.tiles(0) <= max_programs:
      plan = narrower
      break
  programs = min(max_programs, max(plan.tiles(l) for l in range(plan.layers)))
  # Warps a program, as measured (docs/design/epoch_kernels.md): with the softmax head and a
  # (rows, block_k) input tile of 8K values, 8 warps are much faster than 4 (register pressure,
  # likely); with smaller tiles (softmax regression's 64 x 32), and with the one-output mse head,
  # 4 are faster.
  wide = head == "xent" and plan.rows * plan.block_k(0) >= 8192
  return dataclasses.replace(plan, programs=programs, num_warps=8 if wide else 4)


def tiles_for(widths, batch, head, precision) -> tuple[int, bool]:
  """The hidden tile width and whether float32 takes split products (see SPLIT_FROM_UNITS)."""
  hidden = tuple(widths[1:-1])
  if (head != "xent" or precision != "float32" or common.tile_side(batch) != 64 or not hidden
      or max(hidden) < SPLIT_FROM_UNITS):
    return HIDDEN_BLOCK, False
  if len(hidden) > 1:
    return 32, True
  return (64 if hidden[0] >= 1024 else HIDDEN_BLOCK), True


# The state the kernel reads and writes, as one flat list of arrays in a fixed order. ----------

def state_names(plan: Plan) -> list[str]:
  L = plan.layers
  names = [f"w{l}" for l in range(L)]
  if plan.bias:
    names += [f"b{l}" for l in range(L)]
  for slot in SLOTS[_optimizer(plan)]:  # Optimizer state beside each weight and bias.
    names += [f"{slot}w{l}" for l in range(L)]
    names += [f"{slot}b{l}" for l in range(L)] if plan.bias else []
  names += [f"part{l}" for l in range(L)]  # Partial pre-activations, (k_tiles * rows, n_out).
  names += [f"act{l}" for l in range(1, L)]  # Hidden activations, (rows, n_l).
  names += [f"dact{l}" for l in range(1, L - 1)]  # Gradients of hidden activations, partial
  # by n-tile of the layer above: (n_tiles(l) * rows, n_l).
  names += ["loss", "correct"]
  return names


def scratch_shapes(plan: Plan, dtype) -> dict:
  L, R = plan.layers, plan.rows
  s = {f"part{l}": (plan.k_tiles(l) * R, plan.widths[l + 1]) for l in range(L - 1)}
  s[f"part{L - 1}"] = ((2 * plan.k_tiles(L - 1) * R,) if plan.vector_out  # By step parity.
                       else (2 * plan.k_tiles(L - 1) * R, plan.widths[-1]))
  s.update({f"act{l}": (R, plan.widths[l]) for l in range(1, L)})
  s.update({f"dact{l}": (plan.n_tiles(l) * R, plan.widths[l]) for l in range(1, L - 1)})
  shapes = {k: jax.ShapeDtypeStruct(v, dtype) for k, v in s.items()}
  shapes["loss"] = jax.ShapeDtypeStruct((plan.steps,), dtype)
  shapes["correct"] = jax.ShapeDtypeStruct((plan.steps,), jnp.int32)
  return shapes


# The phases ------------------------------------------------------------------------------------

def _tile_loop(plan: Plan, pid, n_tiles: int, body):
  """Run ``body(t)`` for this program's tiles t = pid, pid + P, ... below ``n_tiles``."""
  def run(i, _):
    t = pid.astype(jnp.int32) + i * np.int32(plan.programs)

    @pl.when(t < n_tiles)
    def _():
      body(t)
    return 0
  lax.fori_loop(np.int32(0), np.int32(pl.cdiv(n_tiles, plan.programs)), run, 0)


def _for_tiles(plan: Plan, pid, l: int, body):
  """Run ``body(kt, nt, k0, n0)`` for each of this program's tiles of layer l: tile (kt, nt)
  covers inputs k0 = kt * block_k ... and outputs n0 = nt * block_n ..."""
  n = np.int32(plan.n_tiles(l))  # Not a Python int: int64 when x64 is enabled.

  def tile(t):
    kt, nt = lax.div(t, n), lax.rem(t, n)
    body(kt, nt, kt * plan.block_k(l), nt * plan.block_n(l))
  _tile_loop(plan, pid, plan.tiles(l), tile)


def _parity(s):
  return lax.rem(s, np.int32(2))


def _row_ok(plan):
  return jnp.arange(plan.rows) < plan.batch


def _inputs(plan, x_ref, s, k0, bk):
  """The (rows, bk) tile of step s's inputs, columns k0.., zeros in padded rows. ``x_ref`` holds
  the epoch's examples in batch order (gathered once an epoch), so no index is loaded first."""
  x = common.load_tile(x_ref, s * plan.batch, k0, plan.rows, bk, row_ok=_row_ok(plan))
  if x_ref.dtype == jnp.uint8:
    x = x.astype(jnp.float32)
    scaled = plan.scale_u8 and not plan.int_inputs
    return x * (1.0 / 255.0) if scaled else x  # As train.to_float: a product, bit for bit.
  return x.astype(common.acc_dtype(x_ref.dtype))


def _sum_parts(ref, n_parts, rows, c0, bc, r0=0):
  """sum over p of ref[r0 + p * rows:..., c0:c0 + bc], in order p = 0, 1, ... (of a 1-D ref:
  ref[r0 + p * rows:...], rows long). Unrolled up to 32 parts, so that all the loads are in
  flight at once."""
  if len(ref.shape) == 1:
    load = lambda p: common.load_vec(ref, r0 + p * rows, rows, volatile=True)
  else:
    load = lambda p: common.load_tile(ref, r0 + p * rows, c0, rows, bc, volatile=True)
  if n_parts <= 32:
    parts = [load(p) for p in range(n_parts)]
    total = parts[0]
    for part in parts[1:]:
      total = total + part
    return total
  return lax.fori_loop(np.int32(1), np.int32(n_parts), lambda p, acc: acc + load(p), load(0))


def _hidden(plan, st, l, k0, bk):
  """relu(pre-activation) of hidden layer l's units k0..k0+bk (l >= 1), from layer l-1's
  partials, plus the bias."""
  z = _sum_parts(st[f"part{l - 1}"], plan.k_tiles(l - 1), plan.rows, k0, bk)
  return _activation(plan, st, l - 1, z, k0, volatile=True)


def _activation(plan, st, l, z, n0, volatile):
  """relu(z + layer l's bias for units n0..), zeros in padded rows. ``volatile``: the bias was
  stepped by another program."""
  if plan.bias:
    z += common.load_vec(st[f"b{l}"], n0, z.shape[1], volatile=volatile)[None, :]
  return jnp.where(_row_ok(plan)[:, None], jnp.maximum(z, 0.0), 0.0)


def _layer_input(plan, st, io, l, k0, bk, s):
  """The (rows, bk) tile of layer l's input during the backward pass."""
  if l == 0:
    return _inputs(plan, io["x"], s, k0, bk)
  return common.load_tile(st[f"act{l}"], 0, k0, plan.rows, bk, volatile=True)


def _weight_cols(plan, l, s):
  """Where layer l's weight tile columns start, for reading and for writing the step. The last
  layer's weights are read by many programs in the phase where their owners step them, so
  they alternate between two column blocks by step parity; the others are owner-only."""
  if l < plan.layers - 1:
    return 0, 0
  bc = plan.block_n(l)
  return _parity(s) * bc, _parity(s + 1) * bc


def _load(ref, r0, c0, shape):
  if len(shape) == 1:
    return common.load_vec(ref, c0, shape[0])
  return common.load_tile(ref, r0, c0, *shape)


def _store(ref, r0, c0, value):
  if value.ndim == 1:
    common.store_vec(ref, c0, value)
  else:
    common.store_tile(ref, r0, c0, value)


def _product(plan, l, a, b, trans_a=False, trans_b=False):
  """A product of layer l's pass, as ``common.dot``. The last layer of the mse head has one
  real output column in a tile of 16, so its three products (the outputs a @ w, the gradient
  g @ w^T taken down, the weights' gradient a^T g) are written as the broadcasts and sums they
  are: a 16-wide dot of mostly zeros ran 16 times the arithmetic through shared memory. Those
  sums are float32 at every precision. Layer 0's integer inputs (``plan.int_inputs``): their
  products scaled by 1/255 after."""
  if l == 0 and plan.int_inputs:
    return common.dot_split(a, b, trans_a, trans_b, a_exact=True) / 255.0
  if l < plan.layers - 1 or plan.widths[-1] > 1:
    return common.dot(a, b, plan.products, trans_a=trans_a, trans_b=trans_b)
  first = lambda v, n: jnp.where(jnp.arange(n)[None, :] == 0, v[:, None], 0.0)
  if trans_b:  # g @ w^T, g and w real in column 0 only: an outer product.
    return _col0(a)[:, None] * _col0(b)[None, :]
  if trans_a:  # a^T g, g real in column 0 only.
    return first(jnp.sum(a * _col0(b)[:, None], axis=0), b.shape[1])
  return first(_one_output(a, b), b.shape[1])


def _col0(t):
  """Column 0 of a tile (the Triton lowering has no value slices)."""
  return jnp.sum(jnp.where(jnp.arange(t.shape[1])[None, :] == 0, t, 0.0), axis=1)


def _one_output(a, w):
  """a @ w for w real in column 0 only, as a vector of rows."""
  return jnp.sum(a * _col0(w)[None, :], axis=1)


def _direction(plan, st, io, name, r0, c0, grad, s):
  """The update's direction, as optax computes it: plain SGD's g; momentum's trace
  (v = g + momentum * v, stored); Adam's m / (sqrt(v) + eps) with both moments stored and
  bias-corrected by step s's factors (``common.adam_corrections``)."""
  if plan.momentum:
    vref = st["v" + name]
    grad = grad + io["momentum"][...] * _load(vref, r0, c0, grad.shape)
    _store(vref, r0, c0, grad)
    return grad
  if plan.adam:
    mu, nu = (_load(st[slot + name], r0, c0, grad.shape) for slot in ("mu", "nu"))
    m, v, direction = common.adam_moments(grad, mu, nu, *common.adam_factors(io["adam"], s))
    _store(st["mu" + name], r0, c0, m)
    _store(st["nu" + name], r0, c0, v)
    return direction
  return grad


def _update(plan, st, io, name, r0, c0, grad, s, w=None, out_c0=None):
  """SGD, momentum or Adam (as planned) on the tile of ``name`` at (r0, c0), owner-only, in
  step s. ``w``: the tile if already loaded; ``out_c0``: where to write it if not where it was
  read."""
  ref = st[name]
  w = _load(ref, r0, c0, grad.shape) if w is None else w
  direction = _direction(plan, st, io, name, r0, c0 if out_c0 is None else 0, grad, s)
  _store(ref, r0, c0 if out_c0 is None else out_c0, w - io["lr"][...] * direction)


def _store_partial(plan, st, l, kt, n0, a, w, s):
  """Tile (kt, .) of layer l's partial product a @ w into ``part{l}``: the last layer's by step
  parity, the mse head's one output as a vector of rows."""
  r0 = kt * plan.rows
  if l == plan.layers - 1:
    r0 += _parity(s) * (plan.k_tiles(l) * plan.rows)
  if l == plan.layers - 1 and plan.vector_out:
    common.store_vec(st[f"part{l}"], r0, _one_output(a, w))
  else:
    common.store_tile(st[f"part{l}"], r0, n0, _product(plan, l, a, w))


def _weight_tile(plan, st, l, k0, n0, s):
  w_c0, _ = _weight_cols(plan, l, s)
  return common.load_tile(st[f"w{l}"], k0, w_c0 + n0, plan.block_k(l), plan.block_n(l))


def forward_phase(plan, st, io, l, pid, s):
  """F_l: every tile's partial product into ``part{l}``."""
  bk = plan.block_k(l)

  def tile(kt, nt, k0, n0):
    if l == 0:
      a = _inputs(plan, io["x"], s, k0, bk)
    else:
      a = _hidden(plan, st, l, k0, bk)

      @pl.when(nt == 0)  # One program per input tile keeps it for the backward pass.
      def _():
        common.store_tile(st[f"act{l}"], 0, k0, a)
    _store_partial(plan, st, l, kt, n0, a, _weight_tile(plan, st, l, k0, n0, s), s)
  _for_tiles(plan, pid, l, tile)


def merged_forward_phase(plan, st, io, pid, s):
  """F_0 and F_1 as one phase (``plan.merged``): tile (0, nt) of layer 0 holds its units'
  whole pre-activations, so its program forms their activations and, as the owner of the last
  layer's tile nt (those units' rows), that tile's partial outputs."""
  def tile(kt, nt, k0, n0):
    x = _inputs(plan, io["x"], s, k0, plan.block_k(0))
    z = _product(plan, 0, x, _weight_tile(plan, st, 0, k0, n0, s))
    a = _activation(plan, st, 0, z, n0, volatile=False)  # Its own units' bias.
    common.store_tile(st["act1"], 0, n0, a)
    _store_partial(plan, st, 1, nt, 0, a, _weight_tile(plan, st, 1, n0, 0, s), s)
  _for_tiles(plan, pid, 0, tile)


def _head(plan, st, io, s):
  """The last layer's outputs, the per-step loss (and correct count), and dloss/dz."""
  L, R, c = plan.layers, plan.rows, plan.widths[-1]
  bc, ok = plan.block_n(L - 1), _row_ok(plan)
  par = _parity(s)
  z = _sum_parts(st[f"part{L - 1}"], plan.k_tiles(L - 1), R, 0, bc,
                 r0=par * (plan.k_tiles(L - 1) * R))  # (R, bc); (R,) for the mse head.
  if plan.bias:  # Alternates between two rows by step parity, as the last weights do.
    b = common.load_tile(st[f"b{L - 1}"], par, 0, 1, bc, volatile=True)
    z += jnp.sum(b) if plan.vector_out else b  # One output: the (1, bc) tile's one value.
  cols = jnp.arange(bc)
  if plan.head == "xent":
    z = jnp.where(cols[None, :] < c, z, -jnp.inf)
    labels = common.load_vec(io["y"], s * plan.batch, R, other=0)
    labels = jnp.where(ok, labels, 0)
    logsum, loss, correct = row_stats(z, labels, cols)
    g = softmax_minus_onehot(z, labels, cols, logsum) / plan.batch
    g = jnp.where(ok[:, None] & (cols[None, :] < c), g, 0.0)
    correct = jnp.sum(jnp.where(ok, correct, 0))
  else:
    y = common.load_vec(io["y"], s * plan.batch, R).astype(z.dtype)
    diff = jnp.where(ok, z - y, 0.0)
    loss = diff * diff
    g = jnp.where(cols[None, :] == 0, (2.0 / plan.batch) * diff[:, None], 0.0)
    correct = jnp.zeros((), jnp.int32)
  return jnp.sum(jnp.where(ok, loss, 0.0)) / plan.batch, correct, g


def _head_outputs(plan, st, io, s, loss, correct, g):
  """Once a step (one program): the step's loss and correct count, and the last bias' step,
  read from row s % 2 and written to row (s + 1) % 2."""
  common.store_vec(st["loss"], s, jnp.full((16,), loss), ok=jnp.arange(16) == 0)
  common.store_vec(st["correct"], s, jnp.full((16,), correct), ok=jnp.arange(16) == 0)
  if plan.bias:
    L = plan.layers
    ref, db = st[f"b{L - 1}"], jnp.sum(g, axis=0)
    b = common.load_tile(ref, _parity(s), 0, 1, db.shape[0])
    db = _direction(plan, st, io, f"b{L - 1}", 0, 0, db, s)
    common.store_tile(ref, _parity(s + 1), 0, b - io["lr"][...] * db[None, :])


def _backward_tile(plan, st, io, l, kt, nt, k0, n0, g, s, w=None):
  """Layer l's part of the backward pass on tile (kt, nt), given g = dloss/d(outputs n0..):
  the partial dA_l (hidden layers below the top one), W_l -= lr * a_l^T g, and the bias
  (k-tile 0, hidden layers). ``w``: the weight tile if already loaded."""
  bk, bn = plan.block_k(l), plan.block_n(l)
  c0, out_c0 = _weight_cols(plan, l, s)
  if w is None:
    w = common.load_tile(st[f"w{l}"], k0, c0 + n0, bk, bn)
  if 0 < l < plan.layers - 1:
    common.store_tile(st[f"dact{l}"], nt * plan.rows, k0,
                      common.dot(g, w, plan.products, trans_b=True))
  a = _layer_input(plan, st, io, l, k0, bk, s)
  _update(plan, st, io, f"w{l}", k0, n0, _product(plan, l, a, g, trans_a=True), s,
          w=w, out_c0=out_c0 + n0 if l == plan.layers - 1 else None)
  if plan.bias and l < plan.layers - 1:
    @pl.when(kt == 0)
    def _():
      _update(plan, st, io, f"b{l}", 0, n0, jnp.sum(g, axis=0), s)


def top_phase(plan, st, io, pid, s):
  """The head and the last layer's step, and (L > 1) the step of the layer below it, on every
  tile of layer l = max(L - 2, 0). Every program computes the same head (same bits); a tile's
  units n0.. of layer l are the inputs k0 = n0.. of the last layer, whose weight rows it reads
  to take the gradient down through the last layer itself, without another barrier."""
  L = plan.layers
  l = max(L - 2, 0)
  loss, correct, g = _head(plan, st, io, s)  # Once a program, for all its tiles.

  @pl.when(pid == 0)  # The program of tile (0, 0).
  def _():
    _head_outputs(plan, st, io, s, loss, correct, g)

  def tile(kt, nt, k0, n0):
    if L == 1:
      _backward_tile(plan, st, io, 0, kt, nt, k0, n0, g, s)
      return
    bn = plan.block_n(l)
    a_top = common.load_tile(st[f"act{L - 1}"], 0, n0, plan.rows, bn, volatile=True)

    c0, _ = _weight_cols(plan, L - 1, s)
    w_top = common.load_tile(st[f"w{L - 1}"], n0, c0, bn, plan.block_n(L - 1), volatile=True)

    @pl.when(kt == 0)  # The owner of these rows of the last layer steps them.
    def _():
      _backward_tile(plan, st, io, L - 1, nt, 0, n0, 0, g, s, w=w_top)
    g_l = jnp.where(a_top > 0, _product(plan, L - 1, g, w_top, trans_b=True), 0.0)
    _backward_tile(plan, st, io, l, kt, nt, k0, n0, g_l, s)
  _for_tiles(plan, pid, l, tile)


def backward_phase(plan, st, io, l, pid, s):
  """B_l for l < L - 2: g from the partial dA_{l+1} of the layer above, then as top_phase."""
  bn = plan.block_n(l)

  def tile(kt, nt, k0, n0):
    g = _sum_parts(st[f"dact{l + 1}"], plan.n_tiles(l + 1), plan.rows, n0, bn)
    above = common.load_tile(st[f"act{l + 1}"], 0, n0, plan.rows, bn, volatile=True)
    _backward_tile(plan, st, io, l, kt, nt, k0, n0, jnp.where(above > 0, g, 0.0), s)
  _for_tiles(plan, pid, l, tile)


def phases(plan: Plan):
  """The step's phases in order, each ``fn(st, io, pid, s)``, a grid barrier between two."""
  L = plan.layers
  if plan.merged:
    out = [functools.partial(merged_forward_phase, plan)]
  else:
    out = [functools.partial(forward_phase, plan, l=l) for l in range(L)]
  out.append(functools.partial(top_phase, plan))
  out += [functools.partial(backward_phase, plan, l=l) for l in range(L - 3, -1, -1)]
  return [lambda st, io, pid, s, f=f: f(st, io, pid=pid, s=s) for f in out]


# The grid barrier ------------------------------------------------------------------------------

def grid_barrier(counter_ref, programs: int):
  """Wait until all ``programs`` have arrived here. ``counter_ref`` is a zeroed int32 (1,)
  array counting arrivals over the whole launch; every program passes every barrier once.
  Every atomic's result is used: the arrival's count sets the spin's target, and the spin
  reads the counter with atomics (acquire-release at GPU scope) whose results end the loop.
  With discarded results, or with the spin on plain volatile loads and no acquire after it,
  data exchanged across the barrier were read wrong (H100, jax 0.11.2)."""
  plgpu.debug_barrier()  # This program's threads have issued their stores.
  arrived = plgpu.atomic_add(counter_ref, 0, 1)  # Release; returns the count before it.
  target = (lax.div(arrived, np.int32(programs)) + 1) * programs
  lax.while_loop(lambda v: v < target, lambda v: plgpu.atomic_add(counter_ref, 0, 0),
                 arrived + 1)
  plgpu.debug_barrier()


def barrier_stress(programs: int, rounds: int, tile: int = 256, num_warps: int = 4):
  """Check ``grid_barrier`` (GPU): each round every program writes a tile of values that name
  the round and the program, meets the others at the barrier, and reads its neighbour's tile.
  Returns the number of wrong values each program read (all zeros when the barrier holds).
  Buffers alternate by round parity, so one barrier a round suffices."""
  def kernel(counter_ref, buf_ref, bad_ref, _):  # _: the counter's output (aliased, as epoch's)
    pid = pl.program_id(0)
    nxt = lax.rem(pid + 1, np.int32(programs))
    lanes = jnp.arange(tile, dtype=jnp.int32)

    def round_(r, bad):
      par = lax.rem(r, np.int32(2))
      common.store_tile(buf_ref, par * programs + pid, 0, (r * 1000 + pid * 7 + lanes)[None, :])
      grid_barrier(counter_ref, programs)
      got = common.load_tile(buf_ref, par * programs + nxt, 0, 1, tile, volatile=True)
      return bad + jnp.sum((got != (r * 1000 + nxt * 7 + lanes)[None, :]).astype(jnp.int32))
    bad = lax.fori_loop(np.int32(0), np.int32(rounds), round_, jnp.zeros((), jnp.int32))
    common.store_vec(bad_ref, pid, jnp.full((16,), bad), ok=jnp.arange(16) == 0)
  return pl.pallas_call(
      kernel, grid=(programs,),
      out_shape=[jax.ShapeDtypeStruct((2 * programs, tile), jnp.int32),
                 jax.ShapeDtypeStruct((programs,), jnp.int32),
                 jax.ShapeDtypeStruct((1,), jnp.int32)],
      input_output_aliases={0: 2},
      compiler_params=common.compiler_params(num_warps, 1),
      name="barrier_stress")(jnp.zeros((1,), jnp.int32))[1]


# The two forms ---------------------------------------------------------------------------------

IO_NAMES = ("x", "y", "lr", "momentum", "adam")  # The read-only inputs, in call order.


def _call(plan, kernel, io_args, state, extra_in=(), interpret=False, num_warps=None,
          written=()):
  """The state's outputs alias its inputs; so do the extra inputs in ``written`` (their
  indices), which the kernel writes: an input the kernel wrote without an output of its own
  could be a constant buffer that XLA keeps from one launch to the next."""
  names = state_names(plan)
  n_in = len(io_args) + len(extra_in)
  out_shape = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in state]
  out_shape += [jax.ShapeDtypeStruct(extra_in[i].shape, extra_in[i].dtype) for i in written]
  aliases = {n_in + i: i for i in range(len(names))}
  aliases.update({len(io_args) + i: len(names) + j for j, i in enumerate(written)})
  return pl.pallas_call(
      kernel, out_shape=out_shape, grid=(plan.programs,),
      input_output_aliases=aliases,
      compiler_params=common.compiler_params(num_warps or plan.num_warps, 1),
      interpret=interpret, name="mlp_epoch")(*io_args, *extra_in, *state)


def _split_refs(plan, refs, n_extra):
  names = state_names(plan)
  io_refs, rest = refs[:len(IO_NAMES)], refs[len(IO_NAMES):]
  extra, rest = rest[:n_extra], rest[n_extra:]
  # The outputs alias the state inputs: use the outputs (any written extra input's come last).
  state_out = rest[len(names):2 * len(names)]
  return dict(zip(IO_NAMES, io_refs)), list(extra), dict(zip(names, state_out))


def epoch(plan: Plan, io_args, state, num_warps=None):
  """The whole epoch in one launch (GPU). ``state`` as ``init_state``; returns it stepped."""
  counter = jnp.zeros((1,), jnp.int32)
  run_phases = phases(plan)

  def kernel(*refs):
    io, (counter_ref,), st = _split_refs(plan, refs, 1)
    pid = pl.program_id(0)

    def step(s, carry):
      for i, fn in enumerate(run_phases):
        if i:
          grid_barrier(counter_ref, plan.programs)
        fn(st, io, pid, s)
      return carry
    lax.fori_loop(np.int32(0), np.int32(plan.steps), step, 0)
  # The counter aliases an output, so every launch counts from a fresh zero.
  return _call(plan, kernel, io_args, state, (counter,), num_warps=num_warps,
               written=(0,))[:len(state_names(plan))]


def epoch_phases(plan: Plan, io_args, state, interpret=True):
  """The same epoch as one call per phase and step (interpret mode: the CPU tests)."""
  def kernel(fn, *refs):
    io, (s_ref,), st = _split_refs(plan, refs, 1)
    fn(st, io, pl.program_id(0), s_ref[...].astype(jnp.int32))

  def step(s, state):
    for fn in phases(plan):
      state = list(_call(plan, functools.partial(kernel, fn), io_args, state, (s,),
                         interpret=interpret))
    return state
  return lax.fori_loop(np.int32(0), np.int32(plan.steps), step, list(state))


def _slot_trees(plan: Plan, slots) -> list:
  """One params-like tree (or None: zeros) for each of the optimizer's ``SLOTS``."""
  names = SLOTS[_optimizer(plan)]
  if slots is None:
    return [None] * len(names)
  return [slots] if plan.momentum else list(slots)


def init_state(plan: Plan, params, slots=None, dtype=jnp.float32):
  """The kernel's state list from params (a list of {"w", "b"} dicts) and the optimizer's
  state beside them (``SLOTS``: momentum's velocities, a list like params; Adam's moments, a
  pair of such lists; None for zeros). The last layer's weights and bias are stored twice
  (the copy of parity 0 first): weights as two column blocks of block_n, zero-padded, the bias
  as two rows."""
  L, bc = plan.layers, plan.block_n(plan.layers - 1)
  arrays = {f"w{l}": params[l]["w"].astype(dtype) for l in range(L)}
  w_last = jnp.pad(arrays[f"w{L - 1}"], ((0, 0), (0, bc - plan.widths[-1])))
  arrays[f"w{L - 1}"] = jnp.concatenate([w_last, w_last], axis=1)
  if plan.bias:
    arrays.update({f"b{l}": params[l]["b"].astype(dtype) for l in range(L - 1)})
    arrays[f"b{L - 1}"] = jnp.stack([params[-1]["b"].astype(dtype)] * 2)
  for slot, tree in zip(SLOTS[_optimizer(plan)], _slot_trees(plan, slots)):
    for l in range(L):
      for kind in plan.kinds:
        shape = params[l][kind].shape
        arrays[f"{slot}{kind}{l}"] = (jnp.zeros(shape, dtype) if tree is None
                                      else tree[l][kind].astype(dtype))
  for name, shape in scratch_shapes(plan, dtype).items():
    arrays[name] = jnp.zeros(shape.shape, shape.dtype)
  return [arrays[n] for n in state_names(plan)]


def read_state(plan: Plan, state):
  """(params, the optimizer's state as ``init_state`` takes it (None for SGD), per-step losses,
  per-step correct counts) from a state."""
  L, st = plan.layers, dict(zip(state_names(plan), state))
  last = plan.steps % 2  # The copy the last step wrote.
  c0 = last * plan.block_n(L - 1)
  params = []
  for l in range(L):
    layer = {"w": st[f"w{l}"][:, c0:c0 + plan.widths[-1]] if l == L - 1 else st[f"w{l}"]}
    if plan.bias:
      layer["b"] = st[f"b{l}"][last] if l == L - 1 else st[f"b{l}"]
    params.append(layer)
  trees = [[{kind: st[f"{slot}{kind}{l}"] for kind in plan.kinds} for l in range(L)]
           for slot in SLOTS[_optimizer(plan)]]
  slots = None if not trees else trees[0] if plan.momentum else tuple(trees)
  return params, slots, st["loss"], st["correct"]


def train_epoch(params, slots, x, y, order, lr, momentum, *, plan: Plan, fused=True,
                interpret=False, num_warps=None, count=0):
  """One epoch of ``plan``: returns (params, slots, per-step losses, correct counts). ``slots``:
  the optimizer's state beside the parameters, as ``init_state`` takes it (None: zeros);
  ``count``: Adam's steps before this epoch.

  ``x`` (N, n_0) uint8 or float, ``y`` (N,) int32 labels or float targets, ``order`` (>= steps *
  batch,) int32. The epoch's examples are gathered in batch order by one XLA gather first (a
  copy of the data set), so that the kernel's loads of a step's rows do not wait on a load of
  their indices. ``fused``: the one-launch kernel (GPU), else one call per phase (CPU tests).
  ``num_warps``: None for the plan's.
  """
  dtype = common.acc_dtype(jnp.float32 if x.dtype == jnp.uint8 else x.dtype)
  if dtype != jnp.float32:
    plan = dataclasses.replace(plan, split=False)  # bfloat16 parts hold float32's bits only.
  if not (plan.split and plan.scale_u8 and x.dtype == jnp.uint8):
    plan = dataclasses.replace(plan, int_inputs=False)
  idx = order[:plan.steps * plan.batch]
  corrections = (common.adam_corrections(count, plan.steps, dtype) if plan.adam
                 else jnp.ones((16,), dtype))
  io_args = (x[idx], y[idx], jnp.asarray(lr, dtype), jnp.asarray(momentum, dtype), corrections)
  state = init_state(plan, params, slots, dtype)
  if fused:
    state = epoch(plan, io_args, state, num_warps)
  else:
    state = epoch_phases(plan, io_args, state, interpret)
  return read_state(plan, state)
