"""The MLP family's whole epoch in one Pallas launch, in the shape of ``train.train_epoch``:
params and optax state in, params, optax state and metrics out.

Two kinds of kernel train it (``jaxshallow.paths.epoch_kernel`` picks): a grid of programs
that meet at grid-wide barriers (``pallas_kernels.fused.mlp_epoch``; any depth, SGD, momentum
or Adam, batches up to its ``MAX_BATCH``), and on a Hopper GPU, for the networks they take,
thread-block clusters (``cluster_mlp_mgpu``: 784-H-10 for H up to 1792 at batch 64 to 256, and
for H up to 256 at 512, with the jax versions of ``cluster_mlp_mgpu.checked_batches`` (jax 0.11
and 0.12 all of them), plain SGD, a cluster per 256 hidden units, at batch 256 and 512 a network
of up to 256 units in four clusters of the same units where ``rowgroups_for`` gives four);
``cluster_epoch_mgpu``: the regression net 32-H-1 at
batch 256, plain SGD, float32, up to 512 units in one cluster, 1024 in two), a phase kernel
for the regression net 32-256-256-1 (``grid_regression_mgpu``: 64 CTAs meeting at grid
barriers; jax 0.11 and 0.12), and one CTA for
softmax regression (``logreg_mgpu``: batch 64, plain SGD). On a GPU
the grid kernel runs compiled, one launch a call (``run``: an epoch; ``run_epochs``: several,
one after another); elsewhere the same phase code runs in interpret mode, one call per phase
and step (slow, for tests).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxshallow.reduce import fixed_order_mean

MODELS = ("mlp", "logreg", "regression")
OPTIMIZERS = ("sgd", "momentum", "adam")


def problem(model: str, n_outputs: int, batch_size: int, optimizer: str) -> str | None:
  """Why the epoch kernel cannot train this configuration (one line), or None if it can."""
  from pallas_kernels.fused import limits  # Not the kernel itself: a warm run traces nothing.
  if model not in MODELS:
    return f"the {model} is not in the MLP family"
  if optimizer not in OPTIMIZERS:
    return f"it runs {', '.join(OPTIMIZERS)}, not {optimizer}"
  if batch_size > limits.MAX_BATCH:
    return f"batch {batch_size} is over the {limits.MAX_BATCH} rows it holds"
  if n_outputs > limits.MAX_OUTPUTS:
    return f"{n_outputs} outputs are over the {limits.MAX_OUTPUTS} it holds"
  return None


def work_per_program(widths, batch_size: int) -> float:
  """Multiply-adds a pass per program of the grid epoch kernel for this network, judged on an
  H100's 132 SMs wherever it runs, so that a choice made from it is the same on every machine.
  Counted in the tiles of 16 units that ``paths.OPS_FASTER_ABOVE`` was measured with."""
  from pallas_kernels.fused import mlp_epoch
  plan = mlp_epoch.make_plan(widths, batch_size, 1, head="mse" if widths[-1] == 1 else "xent",
                             hidden_block=mlp_epoch.HIDDEN_BLOCK, split=False)
  return plan.work_per_program()


def max_programs() -> int:
  """All programs must be resident at once: at most one per SM on a GPU. On the CPU the count
  changes only which program computes which tile, never a result."""
  d = jax.devices()[0]
  if d.platform == "gpu":
    return int(getattr(d, "core_count", 0) or 132)
  return 8


def optimizer_name(tx, fusion: str) -> str:
  """The optimizer ``jaxshallow.make_optimizer`` recorded in tx; a fused form runs it in a
  kernel of its own, so a bare optax transformation is refused (one line)."""
  name = getattr(tx, "name", None)
  if name is None:
    raise ValueError(f"fusion={fusion!r} runs the optimizer in a kernel: make tx with "
                     "jaxshallow.make_optimizer")
  return name


def slots_of(opt_state, name: str):
  """The optimizer state the grid kernel keeps beside the parameters (``mlp_epoch.SLOTS``):
  optax's momentum trace (``TraceState.trace``, a pytree like params), Adam's moments
  (``ScaleByAdamState``'s mu and nu), or None for plain SGD."""
  if name == "momentum":
    return optax.tree_utils.tree_get(opt_state, "trace")
  if name == "adam":
    return (optax.tree_utils.tree_get(opt_state, "mu"),
            optax.tree_utils.tree_get(opt_state, "nu"))
  return None


def with_slots(opt_state, name: str, slots, steps: int):
  """``opt_state`` after ``steps`` steps that left ``slots`` (as it was, for plain SGD)."""
  if name == "momentum":
    return optax.tree_utils.tree_set(opt_state, trace=slots)
  if name == "adam":
    count = optax.tree_utils.tree_get(opt_state, "count")
    return optax.tree_utils.tree_set(opt_state, mu=slots[0], nu=slots[1], count=count + steps)
  return opt_state


def epoch_metrics(losses, correct, batch_size: int, xent: bool = True) -> dict:
  """The epoch's mean loss (a fixed order of adds) from each step's, and, for classifiers, its
  accuracy from each step's correct count."""
  metrics = {"loss": fixed_order_mean(losses)}
  if xent:
    metrics["accuracy"] = jnp.sum(correct) / (losses.shape[0] * batch_size)  # Integers: any order.
  return metrics


def widths_of(params) -> tuple[int, ...]:
  """An MLP's layer widths, input to output, from its params."""
  return (params[0]["w"].shape[0], *(layer["w"].shape[1] for layer in params))


def run(params, opt_state, images, labels, order, *, tx, steps: int, batch_size: int,
        precision: str, model, kernel: str = "grid"):
  """One epoch through ``kernel`` (``paths.epoch_kernel``'s choice: "grid", "cluster_mlp",
  "cluster_epoch", "grid_regression", "tile_regression", "tile_mlp" or "logreg"); the other
  arguments are
  those of ``train.train_epoch``."""
  params, opt_state, losses, correct = _train(
      params, opt_state, images, labels, order, tx=tx, steps=steps, batch_size=batch_size,
      precision=precision, model=model, kernel=kernel)
  return params, opt_state, epoch_metrics(losses, correct, batch_size, model.loss == "xent")


def run_epochs(params, opt_state, images, labels, orders, *, tx, steps: int, batch_size: int,
               precision: str, model, kernel: str = "grid"):
  """Several epochs through one launch: ``orders`` holds one epoch's order a row, and their
  batches run one after another as one long epoch (the same steps, in the same order, as a
  launch an epoch); each metric comes back with one value an epoch."""
  epochs = orders.shape[0]
  flat = orders[:, :steps * batch_size].reshape(-1)
  params, opt_state, losses, correct = _train(
      params, opt_state, images, labels, flat, tx=tx, steps=epochs * steps,
      batch_size=batch_size, precision=precision, model=model, kernel=kernel)
  xent = model.loss == "xent"
  rows = lambda v: None if v is None else v.reshape(epochs, steps)
  metrics = jax.vmap(lambda l, c: epoch_metrics(l, c, batch_size, xent))(
      rows(losses), rows(correct))
  return params, opt_state, metrics


def _train(params, opt_state, images, labels, order, *, tx, steps: int, batch_size: int,
           precision: str, model, kernel: str):
  """``steps`` steps on ``order``'s batches; returns params, opt_state and each step's loss
  and correct count (None for the regression net)."""
  from pallas_kernels import common
  from pallas_kernels.fused import (cluster_epoch_mgpu, cluster_mlp_mgpu, grid_regression_mgpu,
                                    logreg_mgpu, tile_mlp_mgpu, tile_regression_mgpu)
  name = optimizer_name(tx, "epoch")
  widths = widths_of(params)
  why = problem(model.name, widths[-1], batch_size, name)
  if why:
    raise ValueError(f"fusion='epoch' cannot train this: {why}")
  x = images.reshape(images.shape[0], -1)
  if kernel in ("cluster_mlp", "logreg", "tile_mlp") and x.dtype != jnp.uint8:
    kernel = "grid"  # These kernels take uint8 pixels (integers, exact in bfloat16).
  if kernel == "cluster_epoch":
    params, losses = cluster_epoch_mgpu.train_epoch(params, x, labels, order, tx.lr,
                                                    steps=steps, use_kernel=True)
    return params, opt_state, losses, None
  if kernel in ("grid_regression", "tile_regression"):
    phase = grid_regression_mgpu if kernel == "grid_regression" else tile_regression_mgpu
    params, losses = phase.train_epoch(params, x, labels, order, tx.lr, steps=steps,
                                       use_kernel=True)
    return params, opt_state, losses, None
  if kernel == "tile_mlp":
    params, losses, correct = tile_mlp_mgpu.train_epoch(params, x, labels, order, tx.lr,
                                                        steps=steps, use_kernel=True)
    return params, opt_state, losses, correct
  if kernel == "logreg":
    params, losses, correct = logreg_mgpu.train_epoch(params, x, labels, order, tx.lr,
                                                      steps=steps, precision=precision)
    return params, opt_state, losses, correct
  if kernel == "cluster_mlp":
    params, losses, correct = cluster_mlp_mgpu.train_epoch(params, x, labels, order, tx.lr,
                                                           steps=steps, precision=precision,
                                                           batch=batch_size)
    return params, opt_state, losses, correct
  from pallas_kernels.fused import mlp_epoch  # Triton: imported only for the grid kernel
  plan = mlp_epoch.make_plan(widths, batch_size, steps, head=model.loss, bias="b" in params[0],
                             momentum=name == "momentum", adam=name == "adam",
                             precision=precision, max_programs=max_programs())
  count = optax.tree_utils.tree_get(opt_state, "count") if name == "adam" else 0
  y = labels.astype(jnp.int32) if model.loss == "xent" else labels
  interpret = common.interpret_default()
  params, slots, losses, correct = mlp_epoch.train_epoch(
      params, slots_of(opt_state, name), x, y, order, tx.lr, tx.momentum, plan=plan,
      fused=not interpret, interpret=interpret, count=count)
  return params, with_slots(opt_state, name, slots, steps), losses, correct
