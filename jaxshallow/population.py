"""Many networks trained at once: a population in one compiled program.

Each member has its own seed (its initial weights and its batch order) and its own learning
rate. The members' params and optimizer states are stacked on a leading axis, and one compiled
epoch trains them all: ``jax.vmap`` over the members of the single-network epoch
(``train._epoch``), for the xla impl and for the Pallas op kernels alike (``pallas_call`` under
``vmap`` gets a grid axis for the members). A member's results are those of training it alone.

Across devices, the member axis is sharded over a one-axis ``Mesh`` ("members"): XLA's SPMD
partitioner gives each device its members, and no data moves between devices while they train.
The same code runs on one device, several, or the devices of several processes
(``jaxshallow.distributed``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxshallow import models, train
from jaxshallow import ops as ops_lib

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
           blocks=None):
  """One epoch of every member: ``orders`` (members, n) and ``lrs`` (members,) are each
  member's own. Returns ``(params, opt_state, metrics)``, each metric one value per member."""
  def one(p, s, order, lr):
    tx = train.optax_transform(optimizer, lr, momentum)
    return train._epoch(p, s, images, labels, order, tx=tx, batch_size=batch_size, impl=impl,
                        precision=precision, model=model, blocks=blocks)
  return jax.vmap(one)(params, opt_state, orders, lrs)


_STATIC = ("optimizer", "momentum", "batch_size", "impl", "precision", "model", "blocks")
train_epoch = jax.jit(_epoch, static_argnames=_STATIC, donate_argnums=(0, 1))


@functools.partial(jax.jit, static_argnames=("impl", "precision", "model", "blocks"))
def _eval_batch(params, images, labels, *, impl, precision, model, blocks):
  ops = ops_lib.get_ops(impl, precision, blocks)
  x = train.to_float(images)

  def one(p):
    loss, correct = train.loss_fn(p, x, labels, ops=ops, model=model)
    return loss * labels.shape[0], correct
  return jax.vmap(one)(params)


def evaluate(params, images, labels, *, impl: str = "xla", precision: str = "float32",
             model=models.MLP, blocks=None, batch_size: int = 2000) -> dict:
  """Each member's mean loss (and accuracy, for classifiers), as host arrays."""
  n = labels.shape[0]
  loss, correct = 0.0, 0
  for start in range(0, n, batch_size):
    sl = slice(start, min(start + batch_size, n))
    l, c = _eval_batch(params, images[sl], labels[sl], impl=impl, precision=precision,
                       model=model, blocks=blocks)
    loss, correct = loss + gather(l).astype(np.float64), correct + gather(c)
  result = {"loss": loss / n}
  if model.loss == "xent":
    result["accuracy"] = correct / n
  return result


# Placement on devices -------------------------------------------------------------------------

def mesh(devices=None) -> Mesh:
  """A one-axis mesh over ``devices`` (default: every device of every process)."""
  devices = jax.devices() if devices is None else devices
  return Mesh(np.asarray(devices), (AXIS,))


def shard(tree, the_mesh: Mesh):
  """Host arrays with a leading member axis, spread over the mesh by member. The member count
  must be a multiple of the mesh's size. Works with devices of other processes too: each
  process gives the same whole arrays and keeps the slices of its own devices."""
  return _place(tree, NamedSharding(the_mesh, P(AXIS)))


def replicate(tree, the_mesh: Mesh):
  """Host arrays copied whole to every device of the mesh (the data every member reads)."""
  return _place(tree, NamedSharding(the_mesh, P()))


def _place(tree, sharding):
  def put(a):
    a = np.asarray(a)
    return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])
  return jax.tree.map(put, tree)


def gather(a) -> np.ndarray:
  """A (possibly sharded, possibly multi-process) array as one host array."""
  if isinstance(a, jax.Array) and not a.is_fully_addressable:
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(a, tiled=True))
  return np.asarray(a)
