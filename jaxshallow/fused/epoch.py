"""The MLP family's whole epoch as one Pallas kernel (``pallas_kernels.fused.mlp_epoch``), in the
shape of ``train.train_epoch``: params and optax state in, params, optax state and metrics out.

On a GPU the kernel runs compiled, one launch an epoch; elsewhere the same phase code runs in
interpret mode, one call per phase and step (slow, for tests). On a Hopper GPU two networks
run in one thread-block cluster instead, faster there (docs/PERFORMANCE.md): the regression net
(32-H-1, H up to 512, batch 256, plain SGD, float32) in ``pallas_kernels.fused.cluster_epoch_mgpu``, the
MLP 784-256-10 (batch 64, plain SGD, float32 parameters, any precision of products) in
``pallas_kernels.fused.cluster_mlp_mgpu``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

MODELS = ("mlp", "logreg", "regression")
OPTIMIZERS = ("sgd", "momentum")


def problem(model: str, n_outputs: int, batch_size: int, optimizer: str) -> str | None:
  """Why the epoch kernel cannot train this configuration (one line), or None if it can."""
  from pallas_kernels.fused import mlp_epoch
  if model not in MODELS:
    return f"the {model} is not in the MLP family"
  if optimizer not in OPTIMIZERS:
    return f"it runs {' and '.join(OPTIMIZERS)}, not {optimizer}"
  if batch_size > mlp_epoch.MAX_BATCH:
    return f"batch {batch_size} is over the {mlp_epoch.MAX_BATCH} rows it holds"
  if n_outputs > mlp_epoch.MAX_OUTPUTS:
    return f"{n_outputs} outputs are over the {mlp_epoch.MAX_OUTPUTS} it holds"
  return None


# Above this many multiply-adds per program in a pass, the op kernels trained faster than the
# epoch kernel in every case measured on the H100 (docs/PERFORMANCE.md): the MLP at batch 256
# (about 4.0e5: 0.106 s against 0.162 s) and 512, the regression net 32-256-1024-256-1 (1.0e6).
# Below it the epoch kernel was faster: the MLP at batch 64 and 128, 784-512-256-10 (2.9e5),
# the regression nets 32-128-1 to 32-256-256-1.
OPS_FASTER_ABOVE = 3.5e5


def slower(widths, batch_size: int) -> str | None:
  """Why the op kernels are the faster default for this network (one line), or None. Judged
  on an H100's 132 SMs wherever it runs, so the default is the same on every machine."""
  from pallas_kernels.fused import mlp_epoch
  plan = mlp_epoch.make_plan(widths, batch_size, 1, head="mse" if widths[-1] == 1 else "xent")
  work = plan.work_per_program()
  if work > OPS_FASTER_ABOVE:
    return (f"at batch {batch_size} each of the epoch kernel's programs would run {work:.1e} "
            f"multiply-adds a pass, where the op kernels were faster")
  return None


def _max_programs() -> int:
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


def velocities_of(opt_state, params, name: str):
  """optax's momentum trace as a pytree like params (its TraceState holds one velocity per
  parameter, in params' order), or None for plain SGD."""
  if name != "momentum":
    return None
  return jax.tree.unflatten(jax.tree.structure(params), jax.tree.leaves(opt_state))


def with_velocities(opt_state, velocities):
  """``opt_state`` holding ``velocities`` (as it was, for plain SGD)."""
  if velocities is None:
    return opt_state
  return jax.tree.unflatten(jax.tree.structure(opt_state), jax.tree.leaves(velocities))


def epoch_metrics(losses, correct, batch_size: int, xent: bool = True) -> dict:
  """The epoch's mean loss (a fixed order of adds) from each step's, and, for classifiers, its
  accuracy from each step's correct count."""
  from pallas_kernels import common
  metrics = {"loss": common.fixed_order_mean(losses)}
  if xent:
    metrics["accuracy"] = jnp.sum(correct) / (losses.shape[0] * batch_size)  # Integers: any order.
  return metrics


def cluster_kernel(widths, batch_size: int, *, head: str, bias: bool, optimizer: str,
                   precision: str, dtype):
  """The thread-block-cluster kernel that trains this epoch, or None (then ``mlp_epoch`` does).
  Only on a Hopper GPU: ``cluster_epoch_mgpu`` for the regression nets it takes, in float32 (its
  products keep float32's accuracy; at tf32 and bfloat16 ``mlp_epoch`` was as fast);
  ``cluster_mlp_mgpu`` for the MLP 784-256-10 at any precision (faster than ``mlp_epoch`` at all
  three: docs/PERFORMANCE.md), with a jax that compiles it."""
  from pallas_kernels.fused import cluster_epoch_mgpu, cluster_mlp_mgpu
  from pallas_kernels.ops import dense_mgpu
  if not dense_mgpu.on_hopper():
    return None
  net = dict(bias=bias, optimizer=optimizer, dtype=dtype)
  if (head == "mse" and precision == "float32"
      and cluster_epoch_mgpu.problem(widths, batch_size, **net) is None):
    return cluster_epoch_mgpu
  if (head == "xent" and cluster_mlp_mgpu.lowers() is None
      and cluster_mlp_mgpu.problem(widths, batch_size, **net) is None):
    return cluster_mlp_mgpu
  return None


def run(params, opt_state, images, labels, order, *, tx, steps: int, batch_size: int,
        precision: str, model):
  """One epoch through the kernel; the arguments are those of ``train.train_epoch``."""
  from pallas_kernels.fused import cluster_epoch_mgpu, cluster_mlp_mgpu, mlp_epoch
  from pallas_kernels import common
  name = optimizer_name(tx, "epoch")
  widths = (params[0]["w"].shape[0], *(layer["w"].shape[1] for layer in params))
  why = problem(model.name, widths[-1], batch_size, name)
  if why:
    raise ValueError(f"fusion='epoch' cannot train this: {why}")
  x = images.reshape(images.shape[0], -1)
  cluster = cluster_kernel(widths, batch_size, head=model.loss, bias="b" in params[0],
                           optimizer=name, precision=precision, dtype=params[0]["w"].dtype)
  if cluster is cluster_epoch_mgpu:
    params, losses = cluster_epoch_mgpu.train_epoch(params, x, labels, order, tx.lr, steps=steps,
                                               use_kernel=True)
    return params, opt_state, epoch_metrics(losses, None, batch_size, xent=False)
  if cluster is cluster_mlp_mgpu:
    params, losses, correct = cluster_mlp_mgpu.train_epoch(params, x, labels, order, tx.lr,
                                                           steps=steps, precision=precision)
    return params, opt_state, epoch_metrics(losses, correct, batch_size)
  momentum = name == "momentum"
  plan = mlp_epoch.make_plan(widths, batch_size, steps, head=model.loss, bias="b" in params[0],
                             momentum=momentum, precision=precision,
                             max_programs=_max_programs())
  velocities = velocities_of(opt_state, params, name)
  y = labels.astype(jnp.int32) if model.loss == "xent" else labels
  interpret = common.interpret_default()
  params, velocities, losses, correct = mlp_epoch.train_epoch(
      params, velocities, x, y, order, tx.lr, tx.momentum, plan=plan, fused=not interpret,
      interpret=interpret)
  return (params, with_velocities(opt_state, velocities),
          epoch_metrics(losses, correct, batch_size, xent=model.loss == "xent"))
