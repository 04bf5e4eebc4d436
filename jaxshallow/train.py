"""Training and evaluation as pure, jit-able functions (the Flax MNIST example's shape).

``train_step`` does one SGD-family update; ``train_epoch`` runs a whole epoch as one compiled
``lax.scan`` with the data resident on the device (``train_epochs`` several epochs in one call);
``evaluate`` gives loss and accuracy.

Partial batches: an epoch takes ``len(order) // batch_size`` full batches from a fresh permutation
and skips the remaining ``len(order) % batch_size`` examples (32 of MNIST's 60,000 at batch 64).
A different few are skipped each epoch, and every step has the same shape, so one compiled step
serves the whole run.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from jaxshallow import models, paths
from jaxshallow import ops as ops_lib
from jaxshallow.fused import epoch as fused_epoch, step as fused_step
from jaxshallow.reduce import fixed_order_mean

OPTIMIZERS = ("sgd", "momentum", "adam")


class Optimizer(NamedTuple):
  """An optax GradientTransformation that also says what it computes, so that a fused epoch
  kernel, which runs the update itself, can run the same one."""
  init: Callable
  update: Callable
  name: str
  lr: float
  momentum: float


def optax_transform(name: str, lr, momentum=0.9) -> optax.GradientTransformation:
  """The optax transformation behind ``make_optimizer``. ``lr`` may be a traced scalar (one
  learning rate per member of a population, under ``vmap``)."""
  if name == "sgd":
    return optax.sgd(lr)
  if name == "momentum":
    return optax.sgd(lr, momentum=momentum)
  if name == "adam":
    return optax.adam(lr)
  raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


def make_optimizer(name: str = "sgd", lr: float = 0.1, momentum: float = 0.9) -> Optimizer:
  """An optax optimizer: plain SGD (default), SGD with momentum, or Adam."""
  tx = optax_transform(name, lr, momentum)
  return Optimizer(tx.init, tx.update, name, float(lr), float(momentum))


def to_float(x):
  """uint8 pixels to float32 in [0, 1] (on the device, per batch); other inputs to float32.
  Times float32 1/255, one IEEE rounding everywhere, as every kernel scales them: XLA's CPU
  backend takes a division by 255 as that product when jitted only (jax 0.12.1)."""
  if x.dtype == jnp.uint8:
    return x.astype(jnp.float32) * (1.0 / 255.0)
  return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def loss_fn(params, x, y, *, ops, model=models.MLP):
  """Mean loss, with the number of correct predictions (0 for regression) as auxiliary output.
  A classifier's last layer and loss go through one op, which Pallas fuses into one kernel."""
  if model.loss == "mse":
    return ops.mse(model.apply(params, x, ops)[:, 0], y), jnp.zeros((), jnp.int32)
  head = params[-1]
  return ops.dense_softmax_cross_entropy(model.features(params, x, ops), head["w"],
                                         head.get("b"), y)


STATIC = ("tx", "impl", "precision", "model", "blocks")  # The static arguments of the steps.


def check_labels(labels, n_classes: int, name: str = "labels") -> None:
  """ValueError (one line) if ``labels`` hold a class outside 0 .. n_classes - 1, which would
  train on silently (NaN losses). On the host, so that the jitted step pays nothing: call it once
  per data set before a jitted loop. ``train_step`` calls it itself where its labels are not
  traced (an eager call), and the trainers (``jaxshallow.run``) once per data set."""
  y = np.asarray(labels)
  if y.size and (y.min() < 0 or y.max() >= n_classes):
    bad = y.max() if y.max() >= n_classes else y.min()
    raise ValueError(f"{name}: class {bad} is outside the network's {n_classes} outputs "
                     f"(classes 0 to {n_classes - 1})")


def check_inputs(params, images, labels, model, names=("batch[0]", "batch[1]")):
  """Raise a ValueError naming the argument and the shapes if ``images`` and ``labels`` cannot
  be ``model``'s input with ``params``. Shapes and dtypes are static, so this runs while
  tracing, before the mistake can surface as an error from deep inside jax."""
  xn, yn = names
  x_shape, y_shape = tuple(jnp.shape(images)), tuple(jnp.shape(labels))
  if len(x_shape) < 2:
    raise ValueError(f"{xn} must hold a batch of examples (B, ...), got shape {x_shape}")
  w_in, w_out = params[0]["w"], params[-1]["w"]
  if model.name == "cnn":
    channels = x_shape[3] if len(x_shape) == 4 else 1
    flat = (((x_shape[1] - 4) // 2) * ((x_shape[2] - 4) // 2) * params[1]["w"].shape[3]
            if len(x_shape) in (3, 4) else -1)
    if channels != w_in.shape[2] or flat != w_out.shape[0]:
      raise ValueError(f"{xn} of shape {x_shape} does not fit the cnn's params: they take "
                       f"images (B, H, W) or (B, H, W, {w_in.shape[2]}) with "
                       f"((H - 4) // 2) * ((W - 4) // 2) * {params[1]['w'].shape[3]} = "
                       f"{w_out.shape[0]} features before the head")
  elif int(np.prod(x_shape[1:])) != w_in.shape[0]:
    raise ValueError(f"{xn} has {int(np.prod(x_shape[1:]))} features per example (shape "
                     f"{x_shape}), but params[0]['w'] of shape {tuple(w_in.shape)} takes "
                     f"{w_in.shape[0]}")
  if y_shape != x_shape[:1]:
    raise ValueError(f"{yn} must hold one value per example of {xn}: shape ({x_shape[0]},) for "
                     f"{xn} of shape {x_shape}, got {y_shape}")
  if model.loss == "xent" and not jnp.issubdtype(jnp.result_type(labels), jnp.integer):
    raise ValueError(f"{yn} must hold integer class labels, got dtype {jnp.result_type(labels)}")
  if model.loss == "xent" and not isinstance(labels, jax.core.Tracer):
    check_labels(labels, w_out.shape[1], yn)  # Concrete values: an eager call.


def train_step(params, opt_state, batch, *, tx, impl: str = "xla", precision: str = "float32",
               model=models.MLP, blocks=None):
  """One update on ``batch = (x, y)``; returns ``(params, opt_state, metrics)``.

  Pure: jit it with ``static_argnames=train.STATIC``. Metrics hold the batch's mean loss and, for
  classifiers, its accuracy. ``blocks`` picks Pallas block sizes (see ``ops.get_ops``).
  """
  x, y = batch
  check_inputs(params, x, y, model)
  ops = ops_lib.get_ops(impl, precision, blocks)
  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
  (loss, correct), grads = grad_fn(params, x, y, ops=ops, model=model)
  updates, opt_state = tx.update(grads, opt_state, params)
  params = optax.apply_updates(params, updates)
  metrics = {"loss": loss}
  if model.loss == "xent":
    metrics["accuracy"] = correct / y.shape[0]
  return params, opt_state, metrics


def check_epoch(params, images, labels, order, batch_size: int, model) -> None:
  """ValueError (one line) where an epoch's arguments do not fit together."""
  check_inputs(params, images, labels, model, names=("images", "labels"))
  if jnp.ndim(order) != 1 or not jnp.issubdtype(jnp.result_type(order), jnp.integer):
    raise ValueError(f"order must be a 1-D array of integer indices into images, got shape "
                     f"{jnp.shape(order)} and dtype {jnp.result_type(order)}")
  if not 1 <= batch_size <= order.shape[0]:
    raise ValueError(f"batch_size must be between 1 and len(order) = {order.shape[0]}, got "
                     f"{batch_size}")


def _epoch_kernel(params, tx, batch_size: int, precision: str, model) -> str:
  """The epoch kernel ``paths.epoch_kernel`` picks for this network."""
  return paths.epoch_kernel(
      fused_epoch.widths_of(params), batch_size, head=model.loss, bias="b" in params[0],
      optimizer=fused_epoch.optimizer_name(tx, "epoch"), precision=precision,
      dtype=params[0]["w"].dtype)


def _epoch(params, opt_state, images, labels, order, *, tx, batch_size: int, impl: str = "xla",
           precision: str = "float32", model=models.MLP, blocks=None, unroll: int = 1,
           fusion: str = "ops"):
  """One epoch over ``images[order]`` (resident on the device) as a single ``lax.scan``, or,
  with ``impl="pallas", fusion="epoch"``, as one Pallas kernel (``jaxshallow.fused.epoch``; the
  kernel ``paths.epoch_kernel`` picks), or with ``fusion="step"`` (the CNN) as a loop over
  steps of Pallas kernels alone (``jaxshallow.fused.step``). ``fusion="xla"`` trains with the
  xla impl's ops whatever ``impl`` says (the path pallas takes where no kernel is faster).

  Returns ``(params, opt_state, metrics)`` with each metric averaged over the epoch's steps.
  """
  check_epoch(params, images, labels, order, batch_size, model)
  steps = order.shape[0] // batch_size
  if fusion == "xla":
    impl, fusion = "xla", "ops"
  if fusion in ("epoch", "step"):
    if impl != "pallas":
      raise ValueError(f"fusion={fusion!r} runs Pallas kernels: it needs impl='pallas', got "
                       f"{impl!r}")
    kw = dict(tx=tx, steps=steps, batch_size=batch_size, precision=precision, model=model)
    if fusion == "step":
      return fused_step.run(params, opt_state, images, labels, order, **kw)
    return fused_epoch.run(params, opt_state, images, labels, order,
                           kernel=_epoch_kernel(params, tx, batch_size, precision, model), **kw)
  if fusion != "ops":
    raise ValueError(f"fusion must be 'ops', 'epoch', 'step' or 'xla', got {fusion!r}")
  batches = order[:steps * batch_size].reshape(steps, batch_size)

  def body(carry, idx):
    p, s = carry
    p, s, metrics = train_step(p, s, (to_float(images[idx]), labels[idx]), tx=tx, impl=impl,
                               precision=precision, model=model, blocks=blocks)
    return (p, s), metrics

  (params, opt_state), metrics = lax.scan(body, (params, opt_state), batches, unroll=unroll)
  # The epoch's mean in a fixed order, so that reported losses repeat bit for bit.
  return params, opt_state, jax.tree.map(fixed_order_mean, metrics)


def _epochs(params, opt_state, images, labels, orders, **static):
  """Several epochs in one call: ``orders`` holds one epoch's order a row, and each metric
  comes back with one value an epoch. For short epochs (a small data set, large batches),
  where dispatching each epoch from the host would cost more than the epoch itself."""
  if jnp.ndim(orders) != 2:
    raise ValueError(f"orders must hold one epoch's order a row (2-D), got shape "
                     f"{jnp.shape(orders)}")
  if static.get("impl") == "pallas" and static.get("fusion") == "epoch":
    return _fused_epochs(params, opt_state, images, labels, orders, **static)

  def body(carry, order):
    p, s, metrics = _epoch(*carry, images, labels, order, **static)
    return (p, s), metrics

  (params, opt_state), metrics = lax.scan(body, (params, opt_state), orders)
  return params, opt_state, metrics


def _fused_epochs(params, opt_state, images, labels, orders, *, tx, batch_size: int,
                  precision: str = "float32", model=models.MLP, **_):
  """The epochs through one launch of the epoch kernel (``jaxshallow.fused.epoch``)."""
  check_epoch(params, images, labels, orders[0], batch_size, model)
  return fused_epoch.run_epochs(
      params, opt_state, images, labels, orders, tx=tx, steps=orders.shape[1] // batch_size,
      batch_size=batch_size, precision=precision, model=model,
      kernel=_epoch_kernel(params, tx, batch_size, precision, model))


_EPOCH_STATIC = STATIC + ("batch_size", "unroll", "fusion")
# ``params`` and ``opt_state`` are donated: their buffers are reused for the results.
train_epoch = jax.jit(_epoch, static_argnames=_EPOCH_STATIC, donate_argnums=(0, 1))
train_epoch_no_donate = jax.jit(_epoch, static_argnames=_EPOCH_STATIC)
train_epochs = jax.jit(_epochs, static_argnames=_EPOCH_STATIC, donate_argnums=(0, 1))
train_epochs_no_donate = jax.jit(_epochs, static_argnames=_EPOCH_STATIC)


def step_on_indices(params, opt_state, images, labels, idx, **static):
  """One step on ``images[idx]``, gathered on the device (for a Python loop over steps)."""
  return train_step(params, opt_state, (to_float(images[idx]), labels[idx]), **static)


def step_on_batch(params, opt_state, x, y, **static):
  """One step on a batch handed over from the host (streamed data)."""
  return train_step(params, opt_state, (to_float(x), y), **static)


def jit_step(step, donate: bool = True):
  """``step`` jitted for a Python loop, donating ``params`` and ``opt_state`` if asked."""
  return jax.jit(step, static_argnames=STATIC, donate_argnums=(0, 1) if donate else ())


@functools.partial(jax.jit, static_argnames=("impl", "precision", "model", "blocks"))
def eval_batch(params, images, labels, *, impl: str = "xla", precision: str = "float32",
               model=models.MLP, blocks=None):
  """Summed loss and number of correct predictions on one batch."""
  ops = ops_lib.get_ops(impl, precision, blocks)
  loss, correct = loss_fn(params, to_float(images), labels, ops=ops, model=model)
  return loss * labels.shape[0], correct


# Compiled once per chunk shape; the trainers compile it ahead through ``compile_cache``.
eval_batch_jit = jax.jit(eval_batch, static_argnames=("impl", "precision", "model", "blocks"))
# Examples a chunk of an evaluation.
EVAL_BATCH = 2000


def evaluate(params, images, labels, *, impl: str = "xla", precision: str = "float32",
             model=models.MLP, blocks=None, batch_size: int = EVAL_BATCH):
  """Mean loss (and accuracy, for classifiers) over a whole data set, in chunks."""
  return evaluate_in_chunks(
      lambda x, y: eval_batch(params, x, y, impl=impl, precision=precision, model=model,
                              blocks=blocks),
      images, labels, model=model, batch_size=batch_size)


def evaluate_in_chunks(batch_fn, images, labels, *, model, batch_size: int,
                       to_host=np.asarray) -> dict:
  """Mean loss (and accuracy) from ``batch_fn(x, y) -> (summed loss, correct count)`` over
  chunks of ``batch_size`` examples, added up on the host in float64. For a population the
  values are arrays with one entry per member; ``to_host`` fetches them."""
  n = labels.shape[0]
  total_loss, correct = 0.0, 0
  for start in range(0, n, batch_size):
    sl = slice(start, min(start + batch_size, n))
    l, c = batch_fn(images[sl], labels[sl])
    total_loss = total_loss + to_host(l).astype(np.float64)
    correct = correct + to_host(c)
  result = {"loss": total_loss / n}
  if model.loss == "xent":
    result["accuracy"] = correct / n
  return result


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
  """The example order of one epoch: drawn on the host from (seed, epoch), so every impl, the
  NumPy reference included, sees the same batches."""
  return np.random.default_rng([seed, epoch]).permutation(n).astype(np.int32)
