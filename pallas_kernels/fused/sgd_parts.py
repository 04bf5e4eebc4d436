"""SGD (with or without momentum) or Adam on many parameters in one launch, from their
gradients' partial sums, and the step's metrics.

Kernels that split a reduction over programs (conv dw over pixel splits, the head's dw over row
blocks) leave P partial tiles per parameter. Added up by XLA, each parameter's sum and update is
a launch of its own, and the step's loss and count a few more (the CNN: 11 launches, each of
them mostly launch cost; docs/design/cnn.md). Here one launch does all of them:

  a program owns ``block`` consecutive elements of one parameter's partial layout; it adds the
  P partials in a fixed order (``rows`` of them at a time by one tile sum, the tiles in
  sequence), then as optax's sgd:  v = g + momentum * v  (optax.trace),  p = p - lr * v
  (v = g without momentum), or as optax's adam (its defaults, ``common.adam_moments``: the
  moments m and v, p = p - lr (m / c1) / (sqrt(v / c2) + eps) with the step's bias corrections
  c1, c2 read from the epoch's array at the step's place), and stores p and the optimizer's
  state in place (``input_output_aliases``);
  one more program sums the batch's row losses and correct predictions and stores them at
  ``step`` of the epoch's arrays, also in place.

A partial layout is the padded tile the producing kernel writes: element (i0, i1, i2) of a
(d0, d1, d2) parameter sits at ((i0 * p1) + i1) * p2 + i2 of each partial of p0 * p1 * p2
elements, pi >= di (channels padded to a power of two, say); padding never reaches a parameter.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from pallas_kernels import common

# Elements a program reads from its partials, about: the parameters with many partials (the
# CNN's conv1: 704) take narrow blocks, so that no one program's loop of loads sets the time.
READ_PER_PROGRAM = 8192
TILE = 8192  # Elements of one loaded tile of partials (rows x block): 64 a thread at 4 warps.


class Layout(NamedTuple):
  """A parameter's shape as (d0, d1, d2) and its partials' padded (p0, p1, p2)."""
  dims: tuple
  padded: tuple

  @property
  def size(self):  # Elements of a partial.
    return self.padded[0] * self.padded[1] * self.padded[2]


def layout(dims, padded=None) -> Layout:
  """(d0, d1, d2) dims, the last ones padded to ``padded`` (default: not padded); fewer dims
  count as leading 1s."""
  dims = (1,) * (3 - len(dims)) + tuple(dims)
  padded = tuple(padded or ())
  return Layout(dims, dims[:3 - len(padded)] + padded)


def _blocks(parts: int, size: int):
  """(elements a program, partial rows a tile) for ``parts`` partials of ``size`` elements."""
  block = max(16, min(1024, pl.next_power_of_2(READ_PER_PROGRAM // parts + 1) // 2))
  block = min(block, max(16, pl.next_power_of_2(size)))
  return block, min(pl.next_power_of_2(parts), max(1, TILE // block))


def reference(parts, params, velocities, lr, momentum, layouts, moments=None, factors=None):
  """The plain-jnp twin: new (params, velocities), or (params, moments) with ``moments`` (Adam's
  (mu list, nu list)) and ``factors`` (the step's bias corrections (c1, c2)); ``velocities``
  None for plain SGD."""
  new_p, new_v, new_m = [], [], ([], [])
  for i, (part, p, lay) in enumerate(zip(parts, params, layouts)):
    (d0, d1, d2), (p0, p1, p2) = lay
    g = part.reshape(-1, p0, p1, p2)[:, :d0, :d1, :d2].sum(0).reshape(p.shape)
    if velocities is not None:
      g = g + momentum * velocities[i]
      new_v.append(g)
    if moments is not None:
      m, v, g = common.adam_moments(g, moments[0][i], moments[1][i], *factors)
      new_m[0].append(m)
      new_m[1].append(v)
    new_p.append(p - lr * g)
  if moments is not None:
    return new_p, new_m
  return new_p, (new_v if velocities is not None else None)


def _update(part_ref, p_ref, v_ref, lr_ref, mu_ref, p_out, v_out, j, *, lay, parts, block, rows,
            adam=None):
  """Program j of a parameter: its ``block`` elements of the partial layout. ``adam``: (its nu
  ref, its nu output, the step's bias corrections (c1, c2)); v_ref and v_out are then mu's."""
  (d0, d1, d2), (_, p1, p2) = lay
  col = j * block + jnp.arange(block)
  i2, i1, i0 = col % p2, (col // p2) % p1, col // (p1 * p2)
  ok = (i0 < d0) & (i1 < d1) & (i2 < d2)
  # Padding lanes get indices past the end, one each (masked: no two lanes store one element).
  flat = jnp.where(ok, (i0 * d1 + i1) * d2 + i2, p_ref.shape[0] + col)
  g = None
  for r0 in range(0, parts, rows):  # Unrolled: the tiles' loads in flight together.
    tile = jnp.sum(common.load_tile(part_ref, r0, j * block, rows, block), axis=0)
    g = tile if g is None else g + tile
  p = plgpu.load(p_ref.at[flat], mask=ok, other=0.0)
  if adam is not None:
    nu_ref, nu_out, factors = adam
    m, v, g = common.adam_moments(g, plgpu.load(v_ref.at[flat], mask=ok, other=0.0),
                                  plgpu.load(nu_ref.at[flat], mask=ok, other=0.0), *factors)
    plgpu.store(v_out.at[flat], m.astype(v_out.dtype), mask=ok)
    plgpu.store(nu_out.at[flat], v.astype(nu_out.dtype), mask=ok)
  elif v_ref is not None:
    g = g + mu_ref[...] * plgpu.load(v_ref.at[flat], mask=ok, other=0.0)
    plgpu.store(v_out.at[flat], g.astype(v_out.dtype), mask=ok)
  plgpu.store(p_out.at[flat], (p - lr_ref[...] * g).astype(p_out.dtype), mask=ok)


def _metrics(loss_ref, correct_ref, step_ref, offset_ref, losses_out, correct_out, stride):
  """The batch's mean loss and correct count, at ``step * stride + offset`` of the epoch's
  arrays."""
  m = loss_ref.shape[0]
  rows = jnp.arange(pl.next_power_of_2(m))
  loss = jnp.sum(plgpu.load(loss_ref.at[rows], mask=rows < m, other=0.0)) / m
  correct = jnp.sum(plgpu.load(correct_ref.at[rows], mask=rows < m, other=0))
  at = jnp.full((1,), step_ref[...] * stride + offset_ref[...], jnp.int32)
  plgpu.store(losses_out.at[at], jnp.full((1,), loss, losses_out.dtype))
  plgpu.store(correct_out.at[at], jnp.full((1,), correct, correct_out.dtype))


def sgd_parts_kernel(*refs, n, slots, plans, stride):
  """refs: n partials, n params, ``slots`` x n optimizer state (momentum's velocities: 1;
  Adam's mu and nu: 2), lr, momentum, row losses, row correct, step, offset, (Adam: the epoch's
  bias corrections), epoch losses, epoch correct, then the outputs: n params, the state, epoch
  losses, epoch correct (all aliased to their inputs)."""
  k = 2 + slots
  parts, params = refs[:n], refs[n:2 * n]
  state = [refs[(2 + i) * n:(3 + i) * n] for i in range(slots)]
  lr_ref, mu_ref, loss_ref, correct_ref, step_ref, offset_ref = refs[k * n:k * n + 6]
  adam = slots == 2
  corrections = refs[k * n + 6] if adam else None
  outs = refs[k * n + 8 + adam:]
  p_outs = outs[:n]
  state_outs = [outs[(1 + i) * n:(2 + i) * n] for i in range(slots)]
  vels, v_outs = (state[0], state_outs[0]) if slots else ([None] * n, [None] * n)
  losses_out, correct_out = outs[-2:]
  # Adam's corrections of this step, the one the metrics are stored at.
  factors = (common.adam_factors(corrections, step_ref[...] * stride + offset_ref[...])
             if adam else None)
  pid = pl.program_id(0)
  start = 0
  for i, plan in enumerate(plans):
    stop = start + plan.programs
    body = functools.partial(_update, parts[i], params[i], vels[i], lr_ref, mu_ref, p_outs[i],
                             v_outs[i], lay=plan.layout, parts=plan.parts, block=plan.block,
                             rows=plan.rows,
                             adam=(state[1][i], state_outs[1][i], factors) if adam else None)
    pl.when((pid >= start) & (pid < stop))(lambda body=body, start=start: body(pid - start))
    start = stop
  pl.when(pid == start)(
      lambda: _metrics(loss_ref, correct_ref, step_ref, offset_ref, losses_out, correct_out,
                       stride))


class _Plan(NamedTuple):
  layout: Layout
  parts: int
  block: int
  rows: int
  programs: int


def sgd_parts(parts, params, velocities, layouts, lr, momentum, row_loss, row_correct, step,
              losses, correct, *, stride=1, offset=0, moments=None, corrections=None,
              num_warps=4, interpret=False):
  """One SGD step on ``params`` (a list of arrays) from ``parts`` (per parameter, its partial
  sums as (P, layout size) or anything that reshapes to it), with optax's momentum trace in
  ``velocities`` (None: plain SGD), ``lr`` and ``momentum`` scalars; or an Adam step, with
  ``moments`` (mu list, nu list: optax's ScaleByAdamState) and ``corrections``
  (``common.adam_corrections`` of the epoch, read at the step's place, as the metrics' are
  stored; velocities None). Also stores the batch's mean
  loss and correct count (from ``row_loss``, ``row_correct``) at ``step`` of ``losses`` and
  ``correct`` (at ``step * stride + offset``: a loop that runs several steps an iteration passes
  its counter, and the step's place in the iteration as a constant operand: no XLA op computes
  it, and the iteration's steps are one kernel, traced and compiled once). Returns (params,
  velocities (Adam: moments), losses, correct), each array updated in place."""
  if moments is not None and (velocities is not None or corrections is None):
    raise ValueError("Adam's moments take the step's corrections and no velocities")
  n = len(params)
  slot_lists = [velocities] if velocities is not None else list(moments or [])
  parts = [part.reshape(-1, lay.size) for part, lay in zip(parts, layouts)]
  plans = []
  for part, lay in zip(parts, layouts):
    block, rows = _blocks(part.shape[0], lay.size)
    plans.append(_Plan(lay, part.shape[0], block, rows, pl.cdiv(lay.size, block)))
  state = [a.reshape(-1) for group in (params, *slot_lists) for a in group]
  dtype = params[0].dtype
  inputs = [*parts, *state, jnp.asarray(lr, dtype), jnp.asarray(momentum, dtype), row_loss,
            row_correct.astype(jnp.int32), jnp.asarray(step, jnp.int32),
            jnp.asarray(offset, jnp.int32),
            *([corrections.astype(dtype)] if moments is not None else []), losses, correct]
  first_state, first_metric = n, len(inputs) - 2
  out_shape = [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in (*state, losses, correct)]
  aliases = {first_state + i: i for i in range(len(state))}
  aliases.update({first_metric: len(state), first_metric + 1: len(state) + 1})
  kernel = functools.partial(sgd_parts_kernel, n=n, slots=len(slot_lists), plans=tuple(plans),
                             stride=stride)
  outs = pl.pallas_call(
      kernel, out_shape=out_shape, grid=(sum(p.programs for p in plans) + 1,),
      input_output_aliases=aliases, compiler_params=common.compiler_params(num_warps, 1),
      interpret=interpret, name="sgd_parts")(*inputs)
  shaped = lambda i, like: [o.reshape(a.shape) for o, a in zip(outs[i * n:(i + 1) * n], like)]
  new_slots = [shaped(1 + i, like) for i, like in enumerate(slot_lists)]
  if moments is not None:
    return shaped(0, params), tuple(new_slots), outs[-2], outs[-1]
  return shaped(0, params), (new_slots[0] if new_slots else None), outs[-2], outs[-1]
