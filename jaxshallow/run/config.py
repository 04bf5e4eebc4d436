"""What one training run is: the Config, its per-model defaults, and its validation.

Every setting a user can get wrong is checked here, before any data is loaded or anything is
compiled, and reported as a ``ConfigError`` whose message is one line meant for the user.
"""

from __future__ import annotations

import dataclasses

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
  # Dispatch the next epoch (or group of sync_every epochs) before waiting for this one's loss,
  # so the device does not idle while the host reads it; False: wait, then dispatch.
  overlap: bool = True
  blocks: str | None = None  # Pallas dense block sizes: None, "BM,BN,BK" or "auto".
  # Pallas only: "epoch", the whole epoch in one kernel (MLP family); "step", a step of Pallas
  # kernels alone, the optimizer's update in one of them (the CNN); or "ops", one step per
  # iteration of a scan through the op kernels and optax. None: epoch or step where they can
  # train the model, else ops.
  fusion: str | None = None
  # Several devices (xla, pallas op kernels): split each step's batch over ``devices`` (0: all)
  # and all-reduce the gradients (``jaxshallow.devices.data_parallel``).
  data_parallel: bool = False
  devices: int = 0


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
       "the numpy impl computes in --numpy_dtype; --precision applies to xla, pallas and "
       "triton only"),
      (cfg.impl != "triton" or cfg.model != "cnn",
       "--impl=triton covers the MLP family (mlp, logreg, regression), not the cnn"),
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
      (cfg.fusion in (None, "epoch", "step", "ops"),
       f"fusion must be epoch, step or ops, got {cfg.fusion!r}"),
      (cfg.fusion is None or cfg.impl == "pallas", "--fusion applies to --impl=pallas only"),
      (cfg.devices >= 0, f"devices must be at least 0 (0: all), got {cfg.devices}"),
      (not cfg.data_parallel or (cfg.impl in ("xla", "pallas") and cfg.dispatch == "scan"),
       "--data_parallel needs --impl=xla or pallas and --dispatch=scan"),
      (positive(cfg.train_limit), f"train_limit must be at least 1, got {cfg.train_limit}"),
      (positive(cfg.test_limit), f"test_limit must be at least 1, got {cfg.test_limit}"),
      (cfg.holdout >= 0, f"holdout must be at least 0, got {cfg.holdout}"),
  ]
  for ok, message in checks:
    if not ok:
      raise ConfigError(message)
  if cfg.impl == "triton":
    import triton_kernels
    if why := triton_kernels.unavailable():
      raise ConfigError(f"--impl=triton needs {why}")
  if cfg.blocks is not None:
    try:
      ops.parse_blocks(cfg.blocks)
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
  cfg = dataclasses.replace(cfg, **fill)
  if cfg.impl == "pallas":
    cfg = dataclasses.replace(cfg, fusion=_fusion(cfg))
  return cfg


def _fusion(cfg: Config) -> str:
  """The fused epoch kernel (MLP family) or the step kernels (CNN) where they can train ``cfg``,
  else the op kernels; a one-line notice when the fused form was asked for, or is the model's
  default, and cannot be used."""
  import logging
  from jaxshallow.fused import epoch as fused_epoch, step as fused_step
  default = ("epoch" if cfg.model in fused_epoch.MODELS else
             "step" if cfg.model in fused_step.MODELS else "ops")
  wanted = cfg.fusion or default
  if wanted == "ops":
    return "ops"
  if wanted == "epoch":
    widths = _widths(cfg)
    why = fused_epoch.problem(cfg.model, widths[-1], cfg.batch_size, cfg.optimizer)
  else:
    why = fused_step.problem(cfg.model, cfg.optimizer)
  if why is None and cfg.dispatch != "scan":
    why = f"--dispatch={cfg.dispatch} runs one step per call"
  if why is None and cfg.data_parallel:
    why = "--data_parallel splits each step over devices"
  if why is None and cfg.blocks is not None:
    why = "--blocks sets the op kernels' block sizes"
  if why:
    logging.getLogger("jaxshallow").warning(
        "--fusion=%s cannot train this (%s): using the op kernels (--fusion=ops)", wanted, why)
    return "ops"
  if cfg.fusion is None and wanted == "epoch":  # The default: the faster of the two, as measured.
    why = fused_epoch.slower(_widths(cfg), cfg.batch_size)
    if why:
      logging.getLogger("jaxshallow").warning(
          "using the op kernels (--fusion=ops): %s (--fusion=epoch to use it anyway)", why)
      return "ops"
  return wanted


def _widths(cfg: Config) -> tuple[int, ...]:
  """The MLP family's layer widths before the data are loaded (``trainers.layer_sizes`` reads
  them from the data): 28 x 28 images and 10 classes, or the synthetic regression's inputs and
  one output."""
  from jaxshallow import synthetic
  if cfg.model == "regression":
    return (synthetic.DIM, *cfg.hidden, 1)
  return (28 * 28, *cfg.hidden, 10)
