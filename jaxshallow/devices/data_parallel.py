"""Data-parallel training of one network: each step's batch split across devices.

Every device holds the whole model and the whole data set (MNIST-sized), takes its slice of each
step's batch, computes the gradients of its slice's mean loss, and the gradients are averaged
over devices with ``psum`` (an all-reduce: NCCL on GPUs) before every device applies the same
update, so the replicas stay equal. The average of equal-sized slices' means is the batch mean:
the same training as on one device, up to the order of the sums.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

from jaxshallow import models, train
from jaxshallow import ops as ops_lib
from jaxshallow.devices import placement

AXIS = "data"


def mesh(count: int = 0) -> Mesh:
  """A one-axis mesh over the first ``count`` devices (0: all)."""
  return placement.mesh(placement.pick_devices(count), AXIS)


def _epoch(params, opt_state, images, labels, order, *, tx, batch_size: int, the_mesh: Mesh,
           impl: str = "xla", precision: str = "float32", model=models.MLP, blocks=None):
  """One epoch as ``train.train_epoch``, each batch split over ``the_mesh``'s devices."""
  n_dev = the_mesh.size
  if batch_size % n_dev:
    raise ValueError(f"batch_size {batch_size} must be a multiple of the {n_dev} devices")
  train.check_inputs(params, images, labels, model, names=("images", "labels"))
  steps = order.shape[0] // batch_size
  batches = order[:steps * batch_size].reshape(steps, n_dev, batch_size // n_dev)
  ops = ops_lib.get_ops(impl, precision, blocks)

  def per_device(params, opt_state, images, labels, batches):
    def body(carry, idx):  # idx: this device's (1, batch_size / n_dev) slice of the batch
      p, s = carry
      idx = idx[0]
      (loss, correct), grads = jax.value_and_grad(train.loss_fn, has_aux=True)(
          p, train.to_float(images[idx]), labels[idx], ops=ops, model=model)
      grads = jax.tree.map(lambda g: lax.psum(g, AXIS) / n_dev, grads)  # All-reduce.
      updates, s = tx.update(grads, s, p)
      metrics = {"loss": lax.psum(loss, AXIS) / n_dev}
      if model.loss == "xent":
        metrics["accuracy"] = lax.psum(correct, AXIS) / batch_size
      return (optax.apply_updates(p, updates), s), metrics

    (params, opt_state), metrics = lax.scan(body, (params, opt_state), batches)
    return params, opt_state, jax.tree.map(jnp.mean, metrics)

  # check_vma=False: the gradients of each device's loss stay its own until the explicit psum.
  # (With the check on, JAX would sum the gradients of the replicated params itself.)
  return jax.shard_map(per_device, mesh=the_mesh,
                       in_specs=(P(), P(), P(), P(), P(None, AXIS)),
                       out_specs=(P(), P(), P()), check_vma=False)(
                           params, opt_state, images, labels, batches)


_STATIC = train.STATIC + ("batch_size", "the_mesh")
train_epoch = jax.jit(_epoch, static_argnames=_STATIC, donate_argnums=(0, 1))
