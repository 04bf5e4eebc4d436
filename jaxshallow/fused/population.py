"""A population's epoch through fused kernels, for ``jaxshallow.population``:

- ``train_epoch``: one member's epoch through the population step kernels
  (``pallas_kernels.fused.population_step``), to ``vmap`` over the members: each step the output
  layer's update, then the hidden layer's update fused with the next batch's forward product,
  which moves the members' hidden-layer weights through memory twice a step where the op kernels
  under ``vmap`` move them three times.
- ``train_epoch_clusters``: every member's epoch through the single network's cluster kernel
  (``cluster_mlp_mgpu``, Hopper), a thread-block cluster a member, in one launch; softmax
  regression's through its one-CTA kernel (``logreg_mgpu``), a CTA a member.
- ``train_epoch_stream``: every member's epoch through the kernel that streams the members'
  weights from global memory every step (``stream_population_mgpu``, Hopper), in launches of
  ``STREAM_CHUNK`` members: faster than a cluster a member where they fill whole launches.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from jaxshallow.reduce import fixed_order_mean


def problem(model: str, n_layers: int, optimizer: str, batch_size: int, n_classes: int,
            has_bias: bool = True) -> str | None:
  """Why the population step kernels cannot train this population, or None if they can."""
  from pallas_kernels.fused import population_step as ps  # Kernels only where they are used.
  checks = [(model == "mlp" and n_layers == 2, "it takes one hidden layer (an mlp)"),
            (has_bias, "it takes layers with biases"),
            (optimizer == "sgd", "it runs plain SGD (--optimizer=sgd)"),
            (batch_size <= ps.MAX_BATCH, f"it takes batches up to {ps.MAX_BATCH}"),
            (n_classes <= ps.MAX_CLASSES, f"it takes up to {ps.MAX_CLASSES} classes")]
  return next((why for ok, why in checks if not ok), None)


def train_epoch(params, images, labels, order, lr, *, batch_size: int, precision: str):
  """One member's epoch through ``pallas_kernels.fused.population_step``: each step the head's
  update, then the hidden layer's update fused with the next batch's forward. Same metrics
  as ``train._epoch``; the caller checks the inputs (``train.check_inputs``)."""
  from pallas_kernels import common
  from pallas_kernels.fused import population_step as ps
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
  step_loss = jax.vmap(fixed_order_mean)(rows)
  step_accuracy = correct.sum(axis=1) / batch_size
  metrics = {"loss": fixed_order_mean(step_loss),
             "accuracy": fixed_order_mean(step_accuracy)}
  return [{"w": w0, "b": b0}, {"w": w1, "b": b1}], metrics


# A cluster a member --------------------------------------------------------------------------

CLUSTER_CHUNK = 64  # Members a launch: their batches (100 MB each for MNIST) gathered per launch.
# Softmax regression's: a CTA a member, an H100's SMs at once (their batches: 13 GB a launch).
LOGREG_CHUNK = 132


def cluster_problem(model: str, widths, optimizer: str, batch_size: int, has_bias: bool,
                    dtype=jnp.float32) -> str | None:
  """Why no kernel of a cluster (or CTA) a member can train this population here, or None if
  one can: the MLP's cluster kernel (``cluster_mlp_mgpu``), softmax regression's one-CTA kernel
  (``logreg_mgpu``)."""
  from pallas_kernels.fused import cluster_mlp_mgpu, logreg_mgpu
  from pallas_kernels.ops import dense_mgpu
  if model not in ("mlp", "logreg"):
    return f"it trains the MLP and softmax regression, not the {model}"
  if not dense_mgpu.on_hopper():
    return "it runs on Hopper GPUs only"
  net = dict(bias=has_bias, optimizer=optimizer, dtype=dtype)
  if model == "logreg":
    return logreg_mgpu.problem(widths, batch_size, **net)
  return cluster_mlp_mgpu.lowers() or cluster_mlp_mgpu.problem(widths, batch_size, **net)


def member_orders(orders, members: int):
  """U orders (U, n) written out one a member (members, n): member i's is order i mod U."""
  return orders if orders.shape[0] == members else orders[jnp.arange(members) % orders.shape[0]]


def _in_chunks(run, params, lrs, orders, most: int):
  """``run(params, lrs, orders)`` of every member, in chunks of at most ``most`` members: one
  call, or a ``lax.map`` over equal chunks, the last padded with copies of member 0 whose
  results are dropped. ``orders`` (U, n): U = the members (split with them), or U < members,
  every chunk on all U orders (chunks of whole periods: chunk c's member i is member c size + i,
  whose order is i mod U). Returns ``run``'s outputs, each (members, ...)."""
  members, sets = lrs.shape[0], orders.shape[0]
  chunks = -(-members // most)
  size = -(-members // chunks)
  if sets < members:
    size = -(-size // sets) * sets
    chunks = -(-members // size)
  pad = chunks * size - members

  def padded(a):  # (members, ...) -> (chunks, size, ...)
    a = jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad, *a.shape[1:]))]) if pad else a
    return a.reshape(chunks, size, *a.shape[1:])

  args = (jax.tree.map(padded, params), padded(jnp.asarray(lrs)))
  if sets == members:
    args = (*args, padded(orders))
    body = lambda a: run(*a)
  else:
    body = lambda a: run(*a, orders)
  if chunks == 1:
    return body(jax.tree.map(lambda a: a[0], args))
  return jax.tree.map(lambda a: a.reshape(chunks * size, *a.shape[2:])[:members],
                      jax.lax.map(body, args))


def train_epoch_clusters(params, images, labels, orders, lrs, *, batch_size: int,
                         precision: str, model: str = "mlp", twin: bool = False):
  """Every member's epoch through ``cluster_mlp_mgpu.train_population``: each member the
  single network's cluster kernel, the members' clusters in one launch of at most
  ``CLUSTER_CHUNK`` (softmax regression, ``model`` "logreg": ``logreg_mgpu.train_population``, a
  CTA a member, at most ``LOGREG_CHUNK``; more in a ``lax.map`` over equal chunks, the last
  padded with copies of member 0 whose results are dropped). ``orders``: (U, n), U a divisor of
  the members, member m training on order m mod U (U < members: members that share a seed; the
  one-CTA kernel then gathers each order's batches once). Returns (params, metrics), as
  ``train_epoch`` under vmap. ``twin``: the kernel's plain-jnp twin in its place
  (``train_population``), for the CPU."""
  from jaxshallow.fused import epoch as fused_epoch
  from pallas_kernels.fused import cluster_mlp_mgpu, logreg_mgpu
  x = images.reshape(images.shape[0], -1)
  members, steps = lrs.shape[0], orders.shape[1] // batch_size
  # Softmax regression: a CTA a member (``logreg_mgpu``), as many at once as an H100 has SMs.
  cm, most = ((logreg_mgpu, LOGREG_CHUNK) if model == "logreg"
              else (cluster_mlp_mgpu, CLUSTER_CHUNK))
  if cm is cluster_mlp_mgpu:  # Its kernel takes a set of batches a member.
    orders = member_orders(orders, members)

  def run(p, lr, orders):
    xs, onehot = jax.vmap(lambda order: cm.batches(x, labels, order, steps))(orders)
    return cm.train_population(p, xs, onehot, lr.astype(p[0]["w"].dtype), precision, twin=twin)

  params, losses, correct = _in_chunks(run, params, lrs, orders, most)
  metrics = jax.vmap(lambda l, c: fused_epoch.epoch_metrics(l, c, batch_size))(losses, correct)
  return params, metrics


# Weights streamed every step ---------------------------------------------------------------

STREAM_CHUNK = 64  # Members a launch: their batches (100 MB each for MNIST) gathered per launch


def stream_problem(model: str, widths, optimizer: str, batch_size: int, has_bias: bool,
                   dtype=jnp.float32) -> str | None:
  """Why the streamed population kernel (``stream_population_mgpu``) cannot train this
  population here, or None if it can."""
  from pallas_kernels.fused import stream_population_mgpu
  from pallas_kernels.ops import dense_mgpu
  if model != "mlp":
    return f"it trains the MLP, not the {model}"
  if not dense_mgpu.on_hopper():
    return "it runs on Hopper GPUs only"
  return stream_population_mgpu.problem(widths, batch_size, bias=has_bias, optimizer=optimizer,
                                        dtype=dtype)


def train_epoch_stream(params, images, labels, orders, lrs, *, batch_size: int,
                       twin: bool = False):
  """Every member's epoch through ``stream_population_mgpu.train_steps``, in launches of at most
  ``STREAM_CHUNK`` members (more in a ``lax.map`` over equal chunks, the last padded with copies
  of member 0 whose results are dropped). ``orders``: (U, n), U = 1 (every member on the same
  batches: gathered once) or a divisor of the members (member m on order m mod U, written out a
  member). Returns (params, metrics), as ``train_epoch`` under vmap. ``twin``: the kernel's
  plain-jnp twin in its place, for the CPU."""
  from jaxshallow.fused import epoch as fused_epoch
  from pallas_kernels.fused import stream_population_mgpu as k
  del batch_size  # (the kernel's: ``stream_problem`` checked it)
  x = images.reshape(images.shape[0], -1)
  members = lrs.shape[0]
  if orders.shape[0] > 1:
    orders = member_orders(orders, members)
  steps = orders.shape[1] // k.BATCH

  def run(p, lr, orders):
    xs, onehot = k.batches(x, labels, orders, steps)
    return (k.reference if twin else k.train_steps)(p, lr.astype(p[0]["w"].dtype), xs, onehot)

  params, losses, correct = _in_chunks(run, params, lrs, orders, STREAM_CHUNK)
  metrics = jax.vmap(lambda l, c: fused_epoch.epoch_metrics(l, c, k.BATCH))(losses, correct)
  return params, metrics
