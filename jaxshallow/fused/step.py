"""The CNN's epoch with a step of Pallas kernels alone (``fusion="step"``), in the shape of
``train.train_epoch``: params and optax state in, params, optax state and metrics out.

With ``fusion="ops"`` a step is ``jax.grad`` over the Pallas ops, then optax: the kernels leave
their weight gradients as partial tiles, and XLA adds each parameter's up and updates it, and
records the step's loss and accuracy, in launches of their own (the CNN: 11 launches, each of
them mostly launch cost; docs/design/cnn.md). Here the step calls the same forward and backward
kernels directly and ends in one kernel (``pallas_kernels.fused.sgd_parts``) that adds up every
partial, runs optax's sgd (with momentum, if asked) or adam on every parameter in place, and
stores the step's metrics in the epoch's arrays; the first kernel
(``pallas_kernels.fused.conv_batch``) reads the step's batch from the data set itself, where XLA
would gather it in two launches more;
and the output layer's gradient kernel spreads its input gradient through the max-pool itself
(even maps), where the pool's backward would be a launch of its own. The upper convolution's
kernel computes the output layer's logits too, in partial sums, and one backward launch runs
both convolutions' weight gradients (``conv_stack.backward_parts``). 5 kernels a step
(batch_conv, conv_relu_pool, dense_xent_grads, conv_stack_bwd, sgd_parts), and the loop's
counter once every ``UNROLL`` steps.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from jax import lax

from jaxshallow.fused import epoch as fused_epoch

MODELS = ("cnn",)
OPTIMIZERS = ("sgd", "momentum", "adam")
# Steps an iteration of the epoch's loop: the loop's counter is an XLA launch of its own, paid
# once an iteration. More steps an iteration made the step faster and the compile longer
# (docs/design/cnn.md).
UNROLL = 4


def problem(model: str, optimizer: str) -> str | None:
  """Why the step kernels cannot train this configuration (one line), or None if they can."""
  if model not in MODELS:
    return f"the step kernels train the {' and '.join(MODELS)}, not the {model}"
  if optimizer not in OPTIMIZERS:
    return f"the step kernels run {' and '.join(OPTIMIZERS)}, not {optimizer}"
  return None


def cnn_step(params, slots, images, labels, order, step, losses, correct, *, batch, lr,
             momentum, precision, interpret, stride=1, offset=0, corrections=None):
  """Step s = ``step * stride + offset`` of an epoch (stride static, offset a number or a traced
  int32, an operand of the kernels): one SGD (or Adam) step of the CNN on the ``batch`` examples
  at ``order[s * batch:]`` of images (N, H, W, 1) and labels; returns (params, slots, losses,
  correct) with the batch's mean loss and correct count stored at s of ``losses`` and
  ``correct``. ``slots``: optax's momentum trace, or Adam's (mu, nu) with ``corrections`` (the
  epoch's bias corrections, ``common.adam_corrections``), or None."""
  from pallas_kernels.fused import conv_batch, sgd_parts
  from pallas_kernels.ops import conv, conv_stack, dense_xent
  (c1, c2, head) = params
  cfg = conv.config(precision)
  y1, x, y_labels = conv_batch.batch_conv(
      images, labels, order, step, c1["w"], c1["b"], batch=batch, precision=precision,
      block_p=cfg["fwd_p"], num_warps=cfg["fwd_warps"], wide=cfg["wide"], stride=stride,
      offset=offset, interpret=interpret)
  # The upper convolution's kernel also computes the head's logits, in partial sums.
  y, res, logits_parts = conv_stack.upper_forward(x, y1, c2["w"], c2["b"], precision, None,
                                                  interpret, head_w=head["w"])
  h = y.reshape(batch, -1)
  # The head spreads its input gradient to the pool's input itself, where every pixel of that
  # is in a window (even sides); else the pool's backward kernel does.
  pool = conv_stack.pool_of(res)
  spread = pool[1][1] % 2 == 0 and pool[1][2] % 2 == 0
  row_loss, row_correct, dh, dw3, db3 = dense_xent.head_call(
      h, head["w"], head["b"], y_labels, with_grads=True, parts=True, precision=precision,
      interpret=interpret, pool=pool if spread else None, logits_parts=logits_parts,
      **dense_xent.SPLIT_BLOCKS)  # The split form: the one that takes logits_parts.
  dw1, db1, dw2, db2 = conv_stack.grad_parts(
      res, None if spread else dh.reshape(y.shape), precision, None, interpret,
      g=dh.reshape(pool[1]) if spread else None)
  (c0, k1), k2 = c1["w"].shape[2:], c2["w"].shape[3]
  layouts = [sgd_parts.layout(*lay) for lay in (
      conv.dw_layout(c0, k1), conv.db_layout(k1), conv.dw_layout(k1, k2), conv.db_layout(k2),
      *dense_xent.grad_layouts(*head["w"].shape))]
  flatten = lambda tree: [a for layer in tree for a in (layer["w"], layer["b"])]
  nest = lambda v: [{"w": v[2 * i], "b": v[2 * i + 1]} for i in range(3)]
  adam = corrections is not None
  vel = None if slots is None or adam else flatten(slots)
  moments = tuple(map(flatten, slots)) if adam else None
  flat, new, losses, correct = sgd_parts.sgd_parts(
      [dw1, db1, dw2, db2, dw3, db3], flatten(params), vel, layouts, lr, momentum, row_loss,
      row_correct, step, losses, correct, stride=stride, offset=offset, moments=moments,
      corrections=corrections, interpret=interpret)
  if adam:
    return nest(flat), tuple(map(nest, new)), losses, correct
  return nest(flat), None if new is None else nest(new), losses, correct


def run(params, opt_state, images, labels, order, *, tx, steps: int, batch_size: int,
        precision: str, model):
  """One epoch of step kernels; the arguments are those of ``train.train_epoch``."""
  from pallas_kernels import common
  name = fused_epoch.optimizer_name(tx, "step")
  why = problem(model.name, name)
  if why:
    raise ValueError(f"fusion='step' cannot train this: {why}")
  slots = fused_epoch.slots_of(opt_state, name)  # None for SGD; Adam's (mu, nu)
  corrections = None
  if name == "adam":  # Each step's bias corrections, read by the update kernel at its place
    count = optax.tree_utils.tree_get(opt_state, "count")
    corrections = common.adam_corrections(count, steps, jax.tree.leaves(params)[0].dtype)
  interpret = common.interpret_default()
  if images.ndim == 3:
    images = images[..., None]

  # One traced step for all of the iteration's: the step's place in it (``offset``) is an
  # operand of the kernels, not a constant of their code, so the UNROLL steps (and the
  # remainder's) are one function, traced, lowered and compiled once (a cold run's compile).
  one_step = jax.jit(functools.partial(
      cnn_step, batch=batch_size, lr=tx.lr, momentum=tx.momentum, precision=precision,
      interpret=interpret, stride=UNROLL))

  def step(count, offset, carry):  # Step count * UNROLL + offset, computed by the kernels.
    p, v, losses, correct = carry
    return one_step(p, v, images, labels, order, jnp.asarray(count, jnp.int32), losses, correct,
                    offset=jnp.asarray(offset, jnp.int32), corrections=corrections)

  def body(count, carry):
    for offset in range(UNROLL):
      carry = step(count, offset, carry)
    return carry

  dtype = jax.tree.leaves(params)[0].dtype
  carry = (params, slots, jnp.zeros((steps,), dtype), jnp.zeros((steps,), jnp.int32))
  if steps // UNROLL:  # (A loop of no iterations would still be compiled.)
    carry = lax.fori_loop(0, steps // UNROLL, body, carry)
  for offset in range(steps % UNROLL):
    carry = step(steps // UNROLL, offset, carry)
  params, slots, losses, correct = carry
  return (params, fused_epoch.with_slots(opt_state, name, slots, steps),
          fused_epoch.epoch_metrics(losses, correct, batch_size))
