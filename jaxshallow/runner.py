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

MODELS = ("mlp",)
# Learning rates that reach the workloads' accuracy targets with plain SGD (see README).
DEFAULT_LR = {"mlp": 0.5}


class ConfigError(ValueError):
  """A bad setting; the message is one line meant for the user."""


@dataclasses.dataclass(frozen=True)
class Config:
  impl: str = "xla"
  model: str = "mlp"
  dataset: str = "mnist"
  epochs: int = 10
  batch_size: int = 64
  lr: float | None = None  # None: the model's DEFAULT_LR.
  optimizer: str = "sgd"
  momentum: float = 0.9
  hidden: tuple[int, ...] = (256,)
  seed: int = 0
  precision: str = "float32"
  numpy_dtype: str = "float32"
  data_dir: str | None = None
  train_limit: int | None = None  # Use only the first N training images (quick runs, tests).
  test_limit: int | None = None
  unroll: int = 1


def validate(cfg: Config) -> None:
  from jaxshallow import ops, train  # Keep the module import light.
  checks = [
      (cfg.impl in ops.IMPLS, f"unknown impl {cfg.impl!r}; choose one of {', '.join(ops.IMPLS)}"),
      (cfg.model in MODELS, f"unknown model {cfg.model!r}; choose one of {', '.join(MODELS)}"),
      (cfg.dataset in data_lib.DATASETS,
       f"unknown dataset {cfg.dataset!r}; choose one of {', '.join(data_lib.DATASETS)}"),
      (cfg.epochs >= 1, f"epochs must be at least 1, got {cfg.epochs}"),
      (cfg.batch_size >= 1, f"batch_size must be at least 1, got {cfg.batch_size}"),
      (cfg.lr is None or (np.isfinite(cfg.lr) and cfg.lr > 0),
       f"lr must be a positive number, got {cfg.lr}"),
      (0 <= cfg.momentum < 1, f"momentum must be in [0, 1), got {cfg.momentum}"),
      (cfg.optimizer in train.OPTIMIZERS,
       f"unknown optimizer {cfg.optimizer!r}; choose one of {', '.join(train.OPTIMIZERS)}"),
      (len(cfg.hidden) >= 1 and all(h >= 1 for h in cfg.hidden),
       f"hidden must list positive widths, got {cfg.hidden}"),
      (cfg.precision in ops.PRECISIONS,
       f"unknown precision {cfg.precision!r}; choose one of {', '.join(ops.PRECISIONS)}"),
      (cfg.numpy_dtype in ("float32", "float64"),
       f"numpy_dtype must be float32 or float64, got {cfg.numpy_dtype!r}"),
      (cfg.impl != "numpy" or cfg.precision == "float32",
       "the numpy impl computes in --numpy_dtype; --precision applies to xla and pallas only"),
      (cfg.unroll >= 1, f"unroll must be at least 1, got {cfg.unroll}"),
      (cfg.train_limit is None or cfg.train_limit >= 1,
       f"train_limit must be at least 1, got {cfg.train_limit}"),
      (cfg.test_limit is None or cfg.test_limit >= 1,
       f"test_limit must be at least 1, got {cfg.test_limit}"),
  ]
  for ok, message in checks:
    if not ok:
      raise ConfigError(message)


def load_data(cfg: Config) -> data_lib.Dataset:
  ds = data_lib.load(cfg.dataset, cfg.data_dir)
  tr, te = slice(cfg.train_limit), slice(cfg.test_limit)
  ds = data_lib.Dataset(ds.train_images[tr], ds.train_labels[tr], ds.test_images[te],
                        ds.test_labels[te])
  if cfg.batch_size > len(ds.train_labels):
    raise ConfigError(f"batch_size {cfg.batch_size} is larger than the training set "
                      f"({len(ds.train_labels)} images)")
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
  validate(cfg)
  if cfg.lr is None:
    cfg = dataclasses.replace(cfg, lr=DEFAULT_LR[cfg.model])
  ds = load_data(cfg)
  sizes = (int(np.prod(ds.train_images.shape[1:])), *cfg.hidden, 10)
  fit = _fit_numpy if cfg.impl == "numpy" else _fit_jax
  result = {**dataclasses.asdict(cfg), "hidden": list(cfg.hidden), **device_info(cfg.impl),
            "n_train": len(ds.train_labels), "n_test": len(ds.test_labels),
            "steps_per_epoch": len(ds.train_labels) // cfg.batch_size}
  result.update(fit(cfg, ds, sizes, log))
  result["train_time_s"] = float(sum(result["epoch_time_s"]))
  log(f"done: test accuracy {100 * result['test_accuracy']:.2f}%  test loss "
      f"{result['test_loss']:.4f}  train {result['train_time_s']:.3f}s  compile "
      f"{result['compile_time_s']:.2f}s  ({result['device']})")
  return result


def _init_params(cfg: Config, sizes):
  import jax
  from jaxshallow import mlp
  return mlp.init_mlp(jax.random.key(cfg.seed), sizes)


def _log_epoch(log, cfg, epoch, loss, seconds):
  log(f"epoch {epoch + 1:3d}/{cfg.epochs}  loss {loss:.5f}  time {seconds:.3f}s")


def _fit_jax(cfg: Config, ds, sizes, log) -> dict:
  import jax
  from jaxshallow import train
  tx = train.make_optimizer(cfg.optimizer, cfg.lr, cfg.momentum)
  params = _init_params(cfg, sizes)
  opt_state = tx.init(params)
  images, labels = jax.device_put(ds.train_images), jax.device_put(ds.train_labels)
  orders = [jax.device_put(train.epoch_order(cfg.seed, e, len(ds.train_labels)))
            for e in range(cfg.epochs)]
  static = dict(impl=cfg.impl, precision=cfg.precision)

  t0 = time.perf_counter()
  epoch_fn = train.train_epoch.lower(
      params, opt_state, images, labels, orders[0], tx=tx, batch_size=cfg.batch_size,
      unroll=cfg.unroll, **static).compile()
  compile_time = time.perf_counter() - t0

  epoch_times, epoch_losses = [], []
  for e in range(cfg.epochs):
    t0 = time.perf_counter()
    params, opt_state, metrics = epoch_fn(params, opt_state, images, labels, orders[e])
    loss = float(jax.block_until_ready(metrics["loss"]))
    epoch_times.append(time.perf_counter() - t0)
    epoch_losses.append(loss)
    _log_epoch(log, cfg, e, loss, epoch_times[-1])

  t0 = time.perf_counter()
  test = train.evaluate(params, jax.device_put(ds.test_images), jax.device_put(ds.test_labels),
                        **static)
  eval_time = time.perf_counter() - t0
  return {"compile_time_s": compile_time, "epoch_time_s": epoch_times,
          "epoch_loss": epoch_losses, "eval_time_s": eval_time,
          "test_loss": test["loss"], "test_accuracy": test["accuracy"]}


def _fit_numpy(cfg: Config, ds, sizes, log) -> dict:
  from jaxshallow import numpy_ref, train
  dtype = np.dtype(cfg.numpy_dtype).type
  params = numpy_ref.cast(_init_params(cfg, sizes), dtype)
  init, update = numpy_ref.make_optimizer(cfg.optimizer, dtype(cfg.lr), dtype(cfg.momentum))
  opt_state = init(params)
  epoch_times, epoch_losses = [], []
  for e in range(cfg.epochs):
    order = train.epoch_order(cfg.seed, e, len(ds.train_labels))
    t0 = time.perf_counter()
    params, opt_state, loss = numpy_ref.train_epoch(
        params, opt_state, ds.train_images, ds.train_labels, order, update=update,
        batch_size=cfg.batch_size, dtype=dtype)
    epoch_times.append(time.perf_counter() - t0)
    epoch_losses.append(loss)
    _log_epoch(log, cfg, e, loss, epoch_times[-1])
  t0 = time.perf_counter()
  test = numpy_ref.evaluate(params, ds.test_images, ds.test_labels, dtype)
  return {"compile_time_s": 0.0, "epoch_time_s": epoch_times, "epoch_loss": epoch_losses,
          "eval_time_s": time.perf_counter() - t0,
          "test_loss": test["loss"], "test_accuracy": test["accuracy"]}


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
