"""Many networks trained at once: a population in one compiled program.

Each member has its own seed (its initial weights and its batch order) and its own learning
rate. The members' params and optimizer states are stacked on a leading axis, and one compiled
epoch trains them all: ``jax.vmap`` over the members of the single-network epoch
(``train._epoch``), for the xla impl and for the Pallas op kernels alike (``pallas_call`` under
``vmap`` gets a grid axis for the members). A member's results are those of training it alone.

``fusion="step"`` (pallas): one-hidden-layer classifiers trained by plain SGD take a step in two
kernels instead (``jaxshallow.fused.population``). ``fusion="cluster"`` (pallas, Hopper): the
reference MLP's members each train in a thread-block cluster of their own, the single network's
whole-epoch kernel (``cluster_mlp_mgpu``), the members' clusters in one launch; softmax
regression's members a CTA each (``logreg_mgpu``).

Across devices, the member axis is sharded over a one-axis ``Mesh`` ("members"), and
``sharded_epoch`` runs the epoch under ``jax.shard_map``: each device trains its own members
with the same program, and no data moves between devices while they train. (Left to XLA's SPMD
partitioner, a Pallas kernel, a custom call it cannot split, would be run whole on every device
with the members gathered to it, and its results come back replicated.)
The same code runs on one device, several, or the devices of several processes
(``jaxshallow.devices.placement``, ``jaxshallow.devices.distributed``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxshallow import models, train
from jaxshallow.devices.placement import gather
from jaxshallow.fused import epoch as fused_epoch, population as fused_population

AXIS = "members"


def stack(trees):
  """A list of pytrees with equal structure as one pytree with a leading member axis."""
  return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def member(tree, i: int):
  """Member ``i`` of a stacked pytree."""
  return jax.tree.map(lambda a: a[i], tree)


def init_params(init_fn, seeds):
  """``init_fn(jax.random.key(seed))`` for each seed, stacked: each member's own start, the
  same as a single run with that seed."""
  return stack([init_fn(jax.random.key(int(s))) for s in seeds])


def init_opt_state(optimizer: str, params, momentum: float = 0.9):
  """Each member's fresh optimizer state (it does not depend on the learning rate)."""
  return jax.vmap(train.optax_transform(optimizer, 0.0, momentum).init)(params)


def epoch_orders(seeds, epoch: int, n: int) -> np.ndarray:
  """(members, n) example orders: member i's is that of a single run with seed ``seeds[i]``."""
  return np.stack([train.epoch_order(int(s), epoch, n) for s in seeds])


def order_period(seeds) -> int:
  """The smallest U that divides the members with seeds[i] == seeds[i mod U] for every member:
  the orders ``_epoch`` needs are then those of the first U seeds (member i trains on order i
  mod U). A grid of learning rates by seeds, laid out learning rate by learning rate
  (``population_run.members``), repeats its seeds with the period of their count."""
  seeds = [int(s) for s in seeds]
  return next(u for u in range(1, len(seeds) + 1)
              if len(seeds) % u == 0 and all(s == seeds[i % u] for i, s in enumerate(seeds)))


def _epoch(params, opt_state, images, labels, orders, lrs, *, optimizer: str, momentum: float,
           batch_size: int, impl: str = "xla", precision: str = "float32", model=models.MLP,
           blocks=None, fusion: str = "ops"):
  """One epoch of every member: ``lrs`` (members,) are each member's own, ``orders`` (U, n)
  with U a divisor of the members, member i training on order i mod U (U = members: each its
  own; fewer where members share a seed, ``order_period``). Returns ``(params, opt_state,
  metrics)``, each metric one value per member.
  ``fusion="step"``: the population step kernels (see the module's docstring), for the CNN its
  own step kernels under ``vmap``; ``"cluster"``: a cluster kernel a member (Hopper, the
  reference MLP, or a CTA a member for softmax regression, which gathers each order's batches
  once; uint8 images); ``"stream"``: the reference MLP's members with their weights streamed
  from global memory every step (Hopper, jax 0.11 and 0.12: ``stream_population_mgpu.CHECKED``);
  ``"xla"``: the xla impl's ops whatever ``impl`` says."""
  members, sets = lrs.shape[0], orders.shape[0]
  if members % sets:
    raise ValueError(f"{sets} orders do not divide {members} members")
  if fusion not in ("cluster", "stream"):  # (Those read U orders where their kernels can.)
    orders = fused_population.member_orders(orders, members)
  if fusion == "xla":
    impl, fusion = "xla", "ops"
  if fusion == "step" and model.name == "cnn":
    def one_cnn(p, s, order, lr):  # The step kernels read lr from tx: each member's own.
      tx = train.optax_transform(optimizer, lr, momentum)
      tx = train.Optimizer(tx.init, tx.update, optimizer, lr, momentum)
      return train._epoch(p, s, images, labels, order, tx=tx, batch_size=batch_size,
                          impl=impl, precision=precision, model=model, fusion="step")
    return jax.vmap(one_cnn)(params, opt_state, orders, lrs)
  if fusion == "step":
    why = (impl != "pallas" and "it is a Pallas kernel (impl='pallas')") or (
        fused_population.problem(model.name, len(params), optimizer, batch_size,
                                 params[-1]["w"].shape[-1], all("b" in layer for layer in params)))
    if why:
      raise ValueError(f"fusion='step' cannot train this population: {why}")
    train.check_inputs(member(params, 0), images, labels, models.MLP,
                       names=("images", "labels"))
    step = functools.partial(fused_population.train_epoch, batch_size=batch_size,
                             precision=precision)
    params, metrics = jax.vmap(step, in_axes=(0, None, None, 0, 0))(params, images, labels,
                                                                    orders, lrs)
    return params, opt_state, metrics
  if fusion in ("cluster", "stream"):  # A kernel that trains every member in one launch
    problem, run = {
        "cluster": (fused_population.cluster_problem,
                    functools.partial(fused_population.train_epoch_clusters,
                                      precision=precision, model=model.name)),
        "stream": (fused_population.stream_problem, fused_population.train_epoch_stream),
    }[fusion]
    widths = fused_epoch.widths_of(member(params, 0))
    why = (impl != "pallas" and "it is a Pallas kernel (impl='pallas')") or (
        images.dtype != jnp.uint8 and f"it takes uint8 pixels, not {images.dtype}") or (
        problem(model.name, widths, optimizer, batch_size,
                all("b" in layer for layer in params), dtype=params[0]["w"].dtype))
    if why:
      raise ValueError(f"fusion={fusion!r} cannot train this population: {why}")
    train.check_inputs(member(params, 0), images, labels, model,
                       names=("images", "labels"))
    params, metrics = run(params, images, labels, orders, lrs, batch_size=batch_size)
    return params, opt_state, metrics
  if fusion != "ops":
    raise ValueError(f"fusion must be 'ops', 'step', 'cluster', 'stream' or 'xla', got "
                     f"{fusion!r}")

  def one(p, s, order, lr):
    tx = train.optax_transform(optimizer, lr, momentum)
    return train._epoch(p, s, images, labels, order, tx=tx, batch_size=batch_size, impl=impl,
                        precision=precision, model=model, blocks=blocks)
  return jax.vmap(one)(params, opt_state, orders, lrs)


_STATIC = ("optimizer", "momentum", "batch_size", "impl", "precision", "model", "blocks",
           "fusion")
train_epoch = jax.jit(_epoch, static_argnames=_STATIC, donate_argnums=(0, 1))


@functools.lru_cache(maxsize=None)
def sharded_epoch(the_mesh, **static):
  """``train_epoch`` with ``static`` fixed, each device of ``the_mesh`` training its slice of the
  members (params, optimizer state, orders and learning rates split on their leading axis, the
  data replicated): ``fn(params, opt_state, images, labels, orders, lrs)``."""
  members, whole = P(the_mesh.axis_names[0]), P()
  body = jax.shard_map(functools.partial(_epoch, **static), mesh=the_mesh,
                       in_specs=(members, members, whole, whole, members, members),
                       out_specs=members, check_vma=False)
  return jax.jit(body, donate_argnums=(0, 1))


def _eval_batch(params, images, labels, **static):
  """``train.eval_batch`` of every member: summed losses and correct counts, one per member."""
  return jax.vmap(lambda p: train.eval_batch(p, images, labels, **static))(params)


@functools.lru_cache(maxsize=None)
def _eval_fn(the_mesh, **static):
  """``_eval_batch`` compiled with ``static``; over ``the_mesh`` each device its members."""
  fn = functools.partial(_eval_batch, **static)
  if the_mesh is not None:
    members, whole = P(the_mesh.axis_names[0]), P()
    fn = jax.shard_map(fn, mesh=the_mesh, in_specs=(members, whole, whole), out_specs=members,
                       check_vma=False)
  return jax.jit(fn)


def evaluate(params, images, labels, *, impl: str = "xla", precision: str = "float32",
             model=models.MLP, blocks=None, batch_size: int = train.EVAL_BATCH,
             the_mesh=None) -> dict:
  """Each member's mean loss (and accuracy, for classifiers), as host arrays; ``the_mesh``:
  the mesh ``params`` are sharded over (their members), if any."""
  fn = _eval_fn(the_mesh, impl=impl, precision=precision, model=model, blocks=blocks)
  return train.evaluate_in_chunks(
      lambda x, y: fn(params, x, y),
      images, labels, model=model, batch_size=batch_size, to_host=gather)
