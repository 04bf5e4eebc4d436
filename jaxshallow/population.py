"""Many networks trained at once: a population in one compiled program.

Each member has its own seed (its initial weights and its batch order) and its own learning
rate. The members' params and optimizer states are stacked on a leading axis, and one compiled
epoch trains them all: ``jax.vmap`` over the members of the single-network epoch
(``train._epoch``), for the xla impl and for the Pallas op kernels alike (``pallas_call`` under
``vmap`` gets a grid axis for the members). A member's results are those of training it alone.

``fusion="step"`` (pallas): one-hidden-layer classifiers trained by plain SGD take a step in two
kernels instead (``pallas_kernels.fused.population_step``: the output layer with its update, then the
hidden layer's update fused with the next batch's forward product), which moves the members'
hidden-layer weights through memory twice a step rather than three times.

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
from jax import lax

from jaxshallow import models, train
from jaxshallow.devices.placement import gather

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


def step_kernels_misfit(model, n_layers: int, optimizer: str, batch_size: int, n_classes: int,
                        has_bias: bool = True) -> str | None:
  """Why ``fusion="step"`` cannot train this population, or None if it can."""
  from pallas_kernels.fused import population_step as ps  # Kernels only where they are used.
  checks = [(model.name == "mlp" and n_layers == 2, "it takes one hidden layer (an mlp)"),
            (has_bias, "it takes layers with biases"),
            (optimizer == "sgd", "it runs plain SGD (--optimizer=sgd)"),
            (batch_size <= ps.MAX_BATCH, f"it takes batches up to {ps.MAX_BATCH}"),
            (n_classes <= ps.MAX_CLASSES, f"it takes up to {ps.MAX_CLASSES} classes")]
  return next((why for ok, why in checks if not ok), None)


def _step_kernel_epoch(params, images, labels, order, lr, *, batch_size: int, precision: str):
  """One member's epoch through ``pallas_kernels.fused.population_step``: each step the head's
  update, then the hidden layer's update fused with the next batch's forward. Same metrics
  as ``train._epoch``."""
  from pallas_kernels import common
  from pallas_kernels.fused import population_step as ps
  train.check_inputs(params, images, labels, models.MLP, names=("images", "labels"))
  images = images.reshape(images.shape[0], -1)  # (n, 28, 28) images as rows of pixels.
  steps = order.shape[0] // batch_size
  batches = order[:steps * batch_size].reshape(steps, batch_size)
  nexts = jnp.roll(batches, -1, axis=0)  # The last step's forward (of step 0's batch) is unused.
  kw = dict(precision=precision, interpret=common.interpret_default())
  (l0, l1), x = params, images[batches[0]]
  fwd = functools.partial(ps.update_forward, **kw, **ps.DEFAULT_BLOCKS)
  w0, h = fwd(l0["w"], None, None, x, l0["b"])

  def body(carry, idx):
    w0, b0, w1, b1, h, x = carry
    gs, b0, w1, b1, rows, correct = ps.head_update(h, labels[idx[0]], b0, w1, b1, lr, **kw)
    x_next = images[idx[1]]
    w0, h = fwd(w0, x, gs, x_next, b0)
    return (w0, b0, w1, b1, h, x_next), (rows, correct)

  (w0, b0, w1, b1, _, _), (rows, correct) = lax.scan(
      body, (w0, l0["b"], l1["w"], l1["b"], h, x), (batches, nexts))
  step_loss = jax.vmap(common.fixed_order_mean)(rows)
  step_accuracy = correct.sum(axis=1) / batch_size
  metrics = {"loss": common.fixed_order_mean(step_loss),
             "accuracy": common.fixed_order_mean(step_accuracy)}
  return [{"w": w0, "b": b0}, {"w": w1, "b": b1}], metrics


def _epoch(params, opt_state, images, labels, orders, lrs, *, optimizer: str, momentum: float,
           batch_size: int, impl: str = "xla", precision: str = "float32", model=models.MLP,
           blocks=None, fusion: str = "ops"):
  """One epoch of every member: ``orders`` (members, n) and ``lrs`` (members,) are each
  member's own. Returns ``(params, opt_state, metrics)``, each metric one value per member.
  ``fusion="step"``: the population step kernels (see the module's docstring)."""
  if fusion == "step":
    why = (impl != "pallas" and "it is a Pallas kernel (impl='pallas')") or step_kernels_misfit(
        model, len(params), optimizer, batch_size, params[-1]["w"].shape[-1],
        all("b" in layer for layer in params))
    if why:
      raise ValueError(f"fusion='step' cannot train this population: {why}")
    step = functools.partial(_step_kernel_epoch, batch_size=batch_size, precision=precision)
    params, metrics = jax.vmap(step, in_axes=(0, None, None, 0, 0))(params, images, labels,
                                                                    orders, lrs)
    return params, opt_state, metrics
  if fusion != "ops":
    raise ValueError(f"fusion must be 'ops' or 'step', got {fusion!r}")

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
