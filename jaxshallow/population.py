"""Many networks trained at once: a population in one compiled program.

Each member has its own seed (its initial weights and its batch order) and its own learning
rate. The members' params and optimizer states are stacked on a leading axis, and one compiled
epoch trains them all: ``jax.vmap`` over the members of the single-network epoch
(``train._epoch``), for the xla impl and for the Pallas op kernels alike (``pallas_call`` under
``vmap`` gets a grid axis for the members). A member's results are those of training it alone.

``fusion="step"`` (pallas): one-hidden-layer classifiers trained by plain SGD take a step in two
kernels instead (``jaxshallow.fused.population``).

Across devices, the member axis is sharded over a one-axis ``Mesh`` ("members"): XLA's SPMD
partitioner gives each device its members, and no data moves between devices while they train.
The same code runs on one device, several, or the devices of several processes
(``jaxshallow.devices.placement``, ``jaxshallow.devices.distributed``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxshallow import models, train
from jaxshallow.devices.placement import gather
from jaxshallow.fused import population as fused_population

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


def _epoch(params, opt_state, images, labels, orders, lrs, *, optimizer: str, momentum: float,
           batch_size: int, impl: str = "xla", precision: str = "float32", model=models.MLP,
           blocks=None, fusion: str = "ops"):
  """One epoch of every member: ``orders`` (members, n) and ``lrs`` (members,) are each
  member's own. Returns ``(params, opt_state, metrics)``, each metric one value per member.
  ``fusion="step"``: the population step kernels (see the module's docstring); ``"xla"``: the
  xla impl's ops whatever ``impl`` says."""
  if fusion == "xla":
    impl, fusion = "xla", "ops"
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
  if fusion != "ops":
    raise ValueError(f"fusion must be 'ops', 'step' or 'xla', got {fusion!r}")

  def one(p, s, order, lr):
    tx = train.optax_transform(optimizer, lr, momentum)
    return train._epoch(p, s, images, labels, order, tx=tx, batch_size=batch_size, impl=impl,
                        precision=precision, model=model, blocks=blocks)
  return jax.vmap(one)(params, opt_state, orders, lrs)


_STATIC = ("optimizer", "momentum", "batch_size", "impl", "precision", "model", "blocks",
           "fusion")
train_epoch = jax.jit(_epoch, static_argnames=_STATIC, donate_argnums=(0, 1))


@functools.partial(jax.jit, static_argnames=("impl", "precision", "model", "blocks"))
def _eval_batch(params, images, labels, **static):
  """``train.eval_batch`` of every member: summed losses and correct counts, one per member."""
  return jax.vmap(lambda p: train.eval_batch(p, images, labels, **static))(params)


def evaluate(params, images, labels, *, impl: str = "xla", precision: str = "float32",
             model=models.MLP, blocks=None, batch_size: int = 2000) -> dict:
  """Each member's mean loss (and accuracy, for classifiers), as host arrays."""
  return train.evaluate_in_chunks(
      lambda x, y: _eval_batch(params, x, y, impl=impl, precision=precision, model=model,
                               blocks=blocks),
      images, labels, model=model, batch_size=batch_size, to_host=gather)
