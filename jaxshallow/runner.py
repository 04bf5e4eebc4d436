"""One training run from a config to a result dict: what the experiment scripts share.

Timing: compilation is done ahead of time (``jit(...).lower(...).compile()``) and reported as
``compile_time_s``; ``epoch_time_s`` covers each compiled epoch, blocked until its results are
ready, and ``train_time_s`` is their sum.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import platform
import tempfile
import time
from typing import Callable

import numpy as np

from jaxshallow import data as data_lib

MODELS = ("mlp", "logreg", "cnn", "regression")
# Per-model defaults, filled in where a Config leaves None.
DEFAULTS = {
    "mlp": dict(optimizer="sgd", epochs=10, batch_size=64, bias=True),
    "logreg": dict(optimizer="sgd", epochs=10, batch_size=64, bias=True),
    "cnn": dict(optimizer="momentum", epochs=5, batch_size=64, bias=True),
    "regression": dict(optimizer="sgd", epochs=100, batch_size=256, bias=False),
}
# Default learning rates by model and optimizer. The classifiers' reach the workloads' accuracy
# targets and the cnn's were chosen on a training-set holdout (README); the regression's is the
# study's. A pair not listed needs --lr.
LEARNING_RATES = {
    ("mlp", "sgd"): 0.5,
    ("logreg", "sgd"): 0.25,
    ("cnn", "momentum"): 0.02,
    ("cnn", "sgd"): 0.15,
    ("regression", "sgd"): 0.002,
}


class ConfigError(ValueError):
  """A bad setting; the message is one line meant for the user."""


@dataclasses.dataclass(frozen=True)
class Config:
  impl: str = "xla"
  model: str = "mlp"
  dataset: str = "mnist"  # mnist | fashion; for the regression model: small | medium | large
  epochs: int | None = None  # None: the model's default, likewise below.
  batch_size: int | None = None
  lr: float | None = None
  optimizer: str | None = None  # sgd | momentum | adam
  momentum: float = 0.9
  hidden: tuple[int, ...] = (256,)  # mlp and regression only.
  bias: bool | None = None
  seed: int = 0
  precision: str = "float32"
  numpy_dtype: str = "float32"
  data_dir: str | None = None
  train_limit: int | None = None  # Use only the first N training examples (quick runs, tests).
  test_limit: int | None = None
  # Hold out the last N training examples and evaluate on them instead of the test set, so that
  # choosing settings (experiments.sweep) never looks at the test set.
  holdout: int = 0
  # Techniques (xla and pallas): see the README's table.
  dispatch: str = "scan"  # scan: the epoch is one compiled loop; loop: Python loop over a jit step
  unroll: int = 1  # Steps per iteration of the scan.
  placement: str = "resident"  # resident on the device, or streamed from the host (loop only)
  donate: bool = True  # Donate params and optimizer state to the update.
  sync: str = "epoch"  # epoch: fetch metrics once an epoch; step: after every step (loop only)
  sync_every: int = 1  # With sync="epoch": bring the losses to the host every N epochs.
  blocks: str | None = None  # Pallas dense block sizes: None, "BM,BN,BK" or "auto".


def _datasets(model: str):
  from jaxshallow import synthetic
  return tuple(synthetic.SIZES) if model == "regression" else tuple(data_lib.DATASETS)


def validate(cfg: Config) -> None:
  from jaxshallow import ops, train  # Keep the module import light.
  positive = lambda v: v is None or v >= 1
  checks = [
      (cfg.impl in ops.IMPLS, f"unknown impl {cfg.impl!r}; choose one of {', '.join(ops.IMPLS)}"),
      (cfg.model in MODELS, f"unknown model {cfg.model!r}; choose one of {', '.join(MODELS)}"),
      (cfg.model not in MODELS or cfg.dataset in _datasets(cfg.model),
       f"unknown dataset {cfg.dataset!r} for model {cfg.model}; choose one of "
       f"{', '.join(_datasets(cfg.model)) if cfg.model in MODELS else ''}"),
      (positive(cfg.epochs), f"epochs must be at least 1, got {cfg.epochs}"),
      (positive(cfg.batch_size), f"batch_size must be at least 1, got {cfg.batch_size}"),
      (cfg.lr is None or (np.isfinite(cfg.lr) and cfg.lr > 0),
       f"lr must be a positive number, got {cfg.lr}"),
      (0 <= cfg.momentum < 1, f"momentum must be in [0, 1), got {cfg.momentum}"),
      (cfg.optimizer is None or cfg.optimizer in train.OPTIMIZERS,
       f"unknown optimizer {cfg.optimizer!r}; choose one of {', '.join(train.OPTIMIZERS)}"),
      (all(h >= 1 for h in cfg.hidden) and (cfg.hidden or cfg.model not in ("mlp", "regression")),
       f"hidden must list positive widths, got {cfg.hidden}"),
      (cfg.precision in ops.PRECISIONS,
       f"unknown precision {cfg.precision!r}; choose one of {', '.join(ops.PRECISIONS)}"),
      (cfg.numpy_dtype in ("float32", "float64"),
       f"numpy_dtype must be float32 or float64, got {cfg.numpy_dtype!r}"),
      (cfg.impl != "numpy" or cfg.precision == "float32",
       "the numpy impl computes in --numpy_dtype; --precision applies to xla and pallas only"),
      (cfg.model != "cnn" or cfg.bias in (None, True), "the cnn always has biases"),
      (cfg.unroll >= 1, f"unroll must be at least 1, got {cfg.unroll}"),
      (cfg.dispatch in ("scan", "loop"), f"dispatch must be scan or loop, got {cfg.dispatch!r}"),
      (cfg.placement in ("resident", "streamed"),
       f"placement must be resident or streamed, got {cfg.placement!r}"),
      (cfg.sync in ("epoch", "step"), f"sync must be epoch or step, got {cfg.sync!r}"),
      (cfg.dispatch == "loop" or (cfg.placement == "resident" and cfg.sync == "epoch"),
       "streamed data and per-step metrics need --dispatch=loop (a scan runs on the device)"),
      (cfg.sync_every >= 1, f"sync_every must be at least 1, got {cfg.sync_every}"),
      (cfg.sync_every == 1 or cfg.sync == "epoch", "--sync_every needs --sync=epoch"),
      (cfg.impl != "numpy" or (cfg.dispatch, cfg.placement, cfg.sync, cfg.unroll, cfg.donate,
                               cfg.sync_every) == ("scan", "resident", "epoch", 1, True, 1),
       "the techniques apply to xla and pallas only"),
      (cfg.blocks is None or cfg.impl == "pallas", "--blocks applies to --impl=pallas only"),
      (positive(cfg.train_limit), f"train_limit must be at least 1, got {cfg.train_limit}"),
      (positive(cfg.test_limit), f"test_limit must be at least 1, got {cfg.test_limit}"),
      (cfg.holdout >= 0, f"holdout must be at least 0, got {cfg.holdout}"),
  ]
  for ok, message in checks:
    if not ok:
      raise ConfigError(message)
  if cfg.blocks is not None:
    from pallas_kernels import parse_blocks
    try:
      parse_blocks(cfg.blocks)
    except ValueError as e:
      raise ConfigError(str(e)) from None


def resolve(cfg: Config) -> Config:
  """Validate ``cfg`` and fill in the model's defaults."""
  validate(cfg)
  fill = {k: v for k, v in DEFAULTS[cfg.model].items() if getattr(cfg, k) is None}
  optimizer = fill.get("optimizer", cfg.optimizer)
  if cfg.lr is None:
    if (cfg.model, optimizer) not in LEARNING_RATES:
      raise ConfigError(f"no default learning rate for the {cfg.model} with --optimizer="
                        f"{optimizer}; give --lr")
    fill["lr"] = LEARNING_RATES[cfg.model, optimizer]
  if cfg.model in ("logreg", "cnn"):
    fill["hidden"] = ()  # Fixed architectures.
  return dataclasses.replace(cfg, **fill)


def load_data(cfg: Config) -> data_lib.Dataset:
  if cfg.model == "regression":
    from jaxshallow import synthetic
    ds = synthetic.load(cfg.dataset, cfg.seed)
  else:
    ds = data_lib.load(cfg.dataset, cfg.data_dir)
  tr, te = slice(cfg.train_limit), slice(cfg.test_limit)
  ds = data_lib.Dataset(ds.train_images[tr], ds.train_labels[tr], ds.test_images[te],
                        ds.test_labels[te])
  if cfg.holdout:
    if cfg.holdout >= len(ds.train_labels):
      raise ConfigError(f"holdout {cfg.holdout} leaves no training examples (the training set "
                        f"has {len(ds.train_labels)})")
    keep = len(ds.train_labels) - cfg.holdout
    ds = data_lib.Dataset(ds.train_images[:keep], ds.train_labels[:keep],
                          ds.train_images[keep:], ds.train_labels[keep:])
  if cfg.batch_size > len(ds.train_labels):
    raise ConfigError(f"batch_size {cfg.batch_size} is larger than the training set "
                      f"({len(ds.train_labels)} examples)")
  return ds


def device_info(impl: str) -> dict:
  import jax
  info = {"jax_version": jax.__version__, "numpy_version": np.__version__}
  if impl == "numpy":
    info["device"] = f"cpu ({platform.processor() or platform.machine()}, numpy)"
  else:
    d = jax.devices()[0]
    info["device"] = f"{d.platform}: {d.device_kind}"
  return info


def run(cfg: Config, log: Callable[[str], None] = print) -> dict:
  """Train ``cfg`` end to end; returns the result dict that ``--out`` writes."""
  cfg = resolve(cfg)
  ds = load_data(cfg)
  trainer = make_trainer(cfg, ds)
  result = {**dataclasses.asdict(cfg), "hidden": list(cfg.hidden), **device_info(cfg.impl),
            "n_train": len(ds.train_labels), "n_test": len(ds.test_labels),
            "evaluated_on": "holdout" if cfg.holdout else "test",
            "steps_per_epoch": len(ds.train_labels) // cfg.batch_size,
            "compile_time_s": trainer.compile()}
  result["epoch_time_s"], result["epoch_loss"] = timed_epochs(
      trainer, cfg.epochs, cfg.sync_every,
      log=lambda e, loss, t: log(f"epoch {e + 1:3d}/{cfg.epochs}  loss {loss:.5f}  time {t:.3f}s"))
  result["train_time_s"] = float(sum(result["epoch_time_s"]))
  t0 = time.perf_counter()
  test = trainer.evaluate("test")
  if cfg.model == "regression":
    result.update(final_mse=trainer.evaluate("train")["loss"], test_mse=test["loss"])
    summary = f"final mse {result['final_mse']:.5f}  test mse {result['test_mse']:.5f}"
  else:
    result.update(test_loss=test["loss"], test_accuracy=test["accuracy"])
    summary = f"test accuracy {100 * test['accuracy']:.2f}%  test loss {test['loss']:.4f}"
  result["eval_time_s"] = time.perf_counter() - t0
  log(f"done: {summary}  train {result['train_time_s']:.3f}s  compile "
      f"{result['compile_time_s']:.2f}s  ({result['device']})")
  return result


def timed_epochs(trainer, epochs: int, sync_every: int = 1, log=None):
  """Train ``epochs`` epochs, bringing the losses to the host every ``sync_every`` epochs.

  Returns per-epoch wall times and mean losses. With ``sync_every`` > 1 nothing waits for the
  device inside a group of epochs, so only the group is timed: each of its epochs gets the
  group's mean time.
  """
  import jax
  times, losses = [], []
  for first in range(0, epochs, sync_every):
    group = range(first, min(first + sync_every, epochs))
    t0 = time.perf_counter()
    if sync_every == 1:
      group_losses = [trainer.run_epoch(first)]  # Returns once the loss is on the host.
    else:
      group_losses = [float(v) for v in jax.device_get([trainer.start_epoch(e) for e in group])]
    seconds = (time.perf_counter() - t0) / len(group)
    for e, loss in zip(group, group_losses):
      times.append(seconds)
      losses.append(loss)
      if log:
        log(e, loss, seconds)
  return times, losses


def init_params(cfg: Config, ds: data_lib.Dataset):
  """Initial parameters from ``jax.random.key(cfg.seed)``: the same start for every impl."""
  import jax
  from jaxshallow import cnn, mlp
  key = jax.random.key(cfg.seed)
  if cfg.model == "cnn":
    return cnn.init_cnn(key, image_size=ds.train_images.shape[1])
  return mlp.init_mlp(key, layer_sizes(cfg, ds), bias=cfg.bias)


def layer_sizes(cfg: Config, ds: data_lib.Dataset) -> tuple[int, ...]:
  """Widths from input to output of the mlp, logreg and regression models."""
  n_out = 1 if cfg.model == "regression" else 10
  return (int(np.prod(ds.train_images.shape[1:])), *cfg.hidden, n_out)


def make_trainer(cfg: Config, ds: data_lib.Dataset, params=None):
  """The trainer of ``cfg.impl``, holding the model state; ``cfg`` must be resolved.
  ``params`` (host or device arrays) default to ``init_params(cfg, ds)``."""
  if params is None:
    params = init_params(cfg, ds)
  return (NumpyTrainer if cfg.impl == "numpy" else JaxTrainer)(cfg, ds, params)


class TrainerState:
  """What lockstep comparisons need of a trainer: its whole state, passed between kinds."""

  def get_state(self):
    """Parameters and the optimizer state's leaves, on the host (see ``state_leaves``)."""
    return self.get_params(), state_leaves(self.opt_state)

  def set_state(self, state):
    """Continue from another trainer's ``get_state()``, of either kind."""
    params, leaves = state
    self.set_params(params)
    self.opt_state = self._put(with_leaves(self.opt_state, leaves))

  @staticmethod
  def _put(tree):
    return tree  # Where the state lives: the host here, the device for JaxTrainer.


class JaxTrainer(TrainerState):
  """xla and pallas. By default the data are resident on the device and an epoch is one
  compiled ``lax.scan``; ``cfg.dispatch``, ``placement``, ``donate`` and ``sync`` switch to the
  slower ways, so each technique can be measured on its own."""

  def __init__(self, cfg: Config, ds: data_lib.Dataset, params):
    import jax
    from jaxshallow import models, train
    self.cfg, self.ds = cfg, ds
    self.tx = train.make_optimizer(cfg.optimizer, cfg.lr, cfg.momentum)
    self.set_params(params)
    self.data = {"train": jax.device_put((ds.train_images, ds.train_labels)),
                 "test": jax.device_put((ds.test_images, ds.test_labels))}
    orders = [train.epoch_order(cfg.seed, e, len(ds.train_labels)) for e in range(cfg.epochs)]
    steps, bs = len(ds.train_labels) // cfg.batch_size, cfg.batch_size
    if cfg.dispatch == "scan":
      self.orders = [jax.device_put(o) for o in orders]
    elif cfg.placement == "resident":  # Each step's indices on the device before timing.
      self.orders = [[jax.device_put(o[s * bs:(s + 1) * bs]) for s in range(steps)]
                     for o in orders]
    else:
      self.orders = [[o[s * bs:(s + 1) * bs] for s in range(steps)] for o in orders]
    self.static = dict(impl=cfg.impl, precision=cfg.precision, model=models.BY_NAME[cfg.model],
                       blocks=cfg.blocks)
    self.fn, self.tune_time_s = None, 0.0

  def _autotune(self):
    """Tune the Pallas dense kernels for this model's shapes before the first trace."""
    from pallas_kernels import autotune
    t0 = time.perf_counter()
    for m, k, n, relu in dense_shapes(self.cfg, self.ds):
      autotune.tune_dense(m, k, n, relu, self.cfg.precision)
    self.tune_time_s = time.perf_counter() - t0

  def compile(self) -> float:
    """Compile ahead of time; returns the seconds it took (autotuning not included)."""
    import jax
    from jaxshallow import train
    if self.cfg.blocks == "auto":
      self._autotune()
    t0 = time.perf_counter()
    if self.cfg.dispatch == "scan":
      epoch = train.train_epoch if self.cfg.donate else train.train_epoch_no_donate
      self.fn = epoch.lower(self.params, self.opt_state, *self.data["train"], self.orders[0],
                            tx=self.tx, batch_size=self.cfg.batch_size, unroll=self.cfg.unroll,
                            **self.static).compile()
    else:
      streamed = self.cfg.placement == "streamed"
      step = train.jit_step(train.step_on_batch if streamed else train.step_on_indices,
                            self.cfg.donate)
      example = (self._host_batch(self.orders[0][0]) if streamed
                 else (*self.data["train"], self.orders[0][0]))
      self.fn = step.lower(self.params, self.opt_state, *example, tx=self.tx,
                           **self.static).compile()
    return time.perf_counter() - t0

  def memory_bytes(self) -> int | None:
    """Device memory of the compiled function: arguments + outputs + temporaries - aliased."""
    try:
      m = self.fn.memory_analysis()
      return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
                 - m.alias_size_in_bytes)
    except Exception:  # noqa: BLE001 -- not every backend reports it.
      return None

  def _host_batch(self, idx):
    import jax
    return jax.device_put((self.ds.train_images[idx], self.ds.train_labels[idx]))

  def run_epoch(self, e: int) -> float:
    """One epoch; returns its mean training loss once it is on the host."""
    return float(self.start_epoch(e))

  def start_epoch(self, e: int):
    """One epoch, dispatched; returns its mean training loss as a device value, so that
    several epochs can run before the host waits (``sync_every``)."""
    import jax.numpy as jnp
    if self.cfg.dispatch == "scan":
      self.params, self.opt_state, metrics = self.fn(
          self.params, self.opt_state, *self.data["train"], self.orders[e])
      return metrics["loss"]
    losses, streamed = [], self.cfg.placement == "streamed"
    batches = self.orders[e]
    nxt = self._host_batch(batches[0]) if streamed else None
    for s, idx in enumerate(batches):
      if streamed:  # Start the next batch's copy before this step runs: they overlap.
        cur, nxt = nxt, (self._host_batch(batches[s + 1]) if s + 1 < len(batches) else None)
        args = cur
      else:
        args = (*self.data["train"], idx)
      self.params, self.opt_state, metrics = self.fn(self.params, self.opt_state, *args)
      losses.append(float(metrics["loss"]) if self.cfg.sync == "step" else metrics["loss"])
    if self.cfg.sync == "step":
      return float(np.mean(losses))  # Already on the host: nothing to send back.
    return jnp.mean(jnp.stack(losses))

  def evaluate(self, split: str = "test") -> dict:
    from jaxshallow import train
    return train.evaluate(self.params, *self.data[split], **self.static)

  def get_params(self):
    import jax
    return jax.tree.map(np.asarray, self.params)

  def set_params(self, params):
    """Start again from ``params`` with a fresh optimizer state. Host arrays are copied to the
    device, so the caller's copy survives the donation of the trainer's buffers."""
    import jax
    self.params = jax.device_put(params)
    self.opt_state = self.tx.init(self.params)

  @staticmethod
  def _put(tree):
    import jax
    return jax.device_put(tree)


def dense_shapes(cfg: Config, ds: data_lib.Dataset):
  """(m, k, n, relu) of every dense layer of the model at this batch size."""
  if cfg.model == "cnn":
    side = (ds.train_images.shape[1] - 4) // 2
    return [(cfg.batch_size, side * side * 32, 10, False)]
  sizes = layer_sizes(cfg, ds)
  return [(cfg.batch_size, k, n, i < len(sizes) - 2)
          for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:]))]


class NumpyTrainer(TrainerState):
  """The NumPy CPU reference, in ``cfg.numpy_dtype``."""

  def __init__(self, cfg: Config, ds: data_lib.Dataset, params):
    import functools
    from jaxshallow import models, numpy_cnn, numpy_ref
    self.cfg, self.ds = cfg, ds
    self.loss = models.BY_NAME[cfg.model].loss
    self.dtype = np.dtype(cfg.numpy_dtype).type
    self.init, self.update = numpy_ref.make_optimizer(cfg.optimizer, self.dtype(cfg.lr),
                                                      self.dtype(cfg.momentum))
    if cfg.model == "cnn":
      self.grad_fn, self.forward_fn = numpy_cnn.loss_and_grads, numpy_cnn.forward
    else:
      self.grad_fn = functools.partial(numpy_ref.loss_and_grads, loss=self.loss)
      self.forward_fn = numpy_ref.forward
    self.set_params(params)

  def compile(self) -> float:
    return 0.0  # Nothing to compile.

  def memory_bytes(self):
    return None  # Host memory; not measured.

  def run_epoch(self, e: int) -> float:
    from jaxshallow import numpy_ref, train
    order = train.epoch_order(self.cfg.seed, e, len(self.ds.train_labels))
    self.params, self.opt_state, loss = numpy_ref.train_epoch(
        self.params, self.opt_state, self.ds.train_images, self.ds.train_labels, order,
        update=self.update, batch_size=self.cfg.batch_size, dtype=self.dtype,
        grad_fn=self.grad_fn)
    return loss

  def evaluate(self, split: str = "test") -> dict:
    from jaxshallow import numpy_ref
    x, y = ((self.ds.test_images, self.ds.test_labels) if split == "test"
            else (self.ds.train_images, self.ds.train_labels))
    return numpy_ref.evaluate(self.params, x, y, self.dtype, forward_fn=self.forward_fn,
                              loss=self.loss)

  def get_params(self):
    return self.params

  def set_params(self, params):
    from jaxshallow import numpy_ref
    self.params = numpy_ref.cast(params, self.dtype)
    self.opt_state = self.init(self.params)



def state_leaves(opt_state) -> list[np.ndarray]:
  """An optimizer state as a flat list of host arrays. optax's states and numpy_ref's hold the
  same leaves in the same order (momentum: one velocity per parameter; adam: the step count,
  then the first and the second moments), so a state can pass between the two kinds."""
  import jax
  return [np.asarray(leaf) for leaf in jax.tree.leaves(opt_state)]


def with_leaves(opt_state, leaves):
  """``opt_state`` with its leaves replaced by ``leaves``, each cast to the old leaf's type."""
  import jax
  old, treedef = jax.tree.flatten(opt_state)
  shapes = [np.shape(a) for a in old]
  if shapes != [np.shape(a) for a in leaves]:
    raise ValueError("the optimizer states do not match; are the optimizers the same?")
  cast = [type(o)(n) if isinstance(o, (int, float)) else np.asarray(n, np.asarray(o).dtype)
          for o, n in zip(old, leaves)]
  return jax.tree.unflatten(treedef, cast)


def write_json(result: dict, path: os.PathLike) -> None:
  """Write atomically: a crash mid-write never replaces a good file with a broken one."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "w") as f:
      json.dump(result, f, indent=2)
      f.write("\n")
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def check_writable(path: os.PathLike) -> None:
  """Fail before training, not after it, if the result file cannot be written."""
  path = pathlib.Path(path)
  if path.is_dir():
    raise ConfigError(f"--out {path} is a directory; give a file name")
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
      pass
  except OSError as e:
    raise ConfigError(f"cannot write --out {path}: {e.strerror or e}") from None
