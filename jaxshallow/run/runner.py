"""One training run from a config to a result dict: what the experiment scripts share.

Timing: compilation is done ahead of time (``jit(...).lower(...).compile()``) and reported as
``compile_time_s``; ``epoch_time_s`` runs from one epoch's loss on the host to the next's (the
next epochs are dispatched before the host waits: ``Config.overlap``), and ``train_time_s`` is
their sum, from the first dispatch to the last loss.

Divergence: an epoch whose mean training loss is NaN or infinite ends the run. The result says
``"diverged": true`` with the epoch, holds no test metrics (a diverged network's accuracy is no
result), and the scripts exit non-zero with one line after writing it.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import pathlib
import platform
import tempfile
import time
from typing import Callable

import numpy as np

from jaxshallow import backends, data as data_lib, files, paths
from jaxshallow.run.config import Config, ConfigError, resolve
from jaxshallow.run.trainers import make_trainer


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


def run(cfg: Config, log: Callable[[str], None] = print, out: str | None = None) -> dict:
  """Train ``cfg`` end to end: validated, the model's defaults filled in (``config.resolve``),
  on the path ``paths`` picks. Returns the result dict, also written to ``out`` as JSON if
  given (checked writable before training)."""
  cfg = paths.resolve(resolve(cfg))
  if out:
    check_writable(out)
  result = _train(cfg, log)
  if out:
    replaced = os.path.exists(out)
    write_json(result, out)
    log(f"wrote {out}" + (" (it replaced the file there)" if replaced else ""))
  return result


def triton_notice(cfg: Config) -> str | None:
  """``backends.notice`` for a resolved Config (one network's, or a population's) whose path
  lowers through Pallas' deprecated Triton backend on a GPU, else None (xla, Mosaic GPU, a jax
  that does not deprecate it, the CPU's interpret mode, which lowers nothing)."""
  if cfg.impl != "pallas" or paths.backend(cfg) != "triton":
    return None
  import jax
  if backends.triton_state() != "deprecated" or jax.default_backend() != "gpu":
    return None
  return backends.notice(f"the {paths.describe(cfg)}", jax.__version__)


def _train(cfg: Config, log) -> dict:
  if note := triton_notice(cfg):
    log(note)
  ds = load_data(cfg)
  trainer = make_trainer(cfg, ds)
  result = {**dataclasses.asdict(cfg), "hidden": list(cfg.hidden), **device_info(cfg.impl),
            "n_train": len(ds.train_labels), "n_test": len(ds.test_labels),
            "evaluated_on": "holdout" if cfg.holdout else "test",
            "steps_per_epoch": len(ds.train_labels) // cfg.batch_size,
            "epochs_per_call": getattr(trainer, "epochs_per_call", 1),
            "path": paths.describe(cfg),
            "compile_time_s": trainer.compile()}
  result["epoch_time_s"], result["epoch_loss"] = timed_epochs(
      trainer, cfg.epochs, cfg.sync_every, cfg.overlap,
      log=lambda e, loss, t: log(f"epoch {e + 1:3d}/{cfg.epochs}  loss {loss:.5f}  time {t:.3f}s"))
  result["train_time_s"] = float(sum(result["epoch_time_s"]))
  bad = [e for e, loss in enumerate(result["epoch_loss"]) if not math.isfinite(loss)]
  result["diverged"] = bool(bad)
  if bad:
    result["diverged_epoch"] = bad[0] + 1
    return result  # The caller says so: the scripts in one line, then exit non-zero.
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


def divergence_message(result: dict) -> str:
  """One line for a diverged run's result."""
  e = result["diverged_epoch"]
  return (f"training diverged in epoch {e} (loss {result['epoch_loss'][e - 1]}); "
          f"try a smaller --lr than {result['lr']:g}")


# Groups of epochs the host keeps dispatched beyond the one whose losses it waits for, with
# ``overlap``. Two, not one: the regression net's epoch (100 short steps) is short enough that
# with one ahead the device sometimes waited for the host (docs/design/cluster_kernels.md).
AHEAD = 2


def timed_epochs(trainer, epochs: int, sync_every: int = 1, overlap: bool = True, log=None):
  """Train ``epochs`` epochs, bringing the losses to the host every ``sync_every`` calls of
  the trainer's ``epochs_per_call`` epochs (1 where it has none).

  Returns per-epoch wall times and mean losses. With ``overlap`` the host keeps ``AHEAD``
  more groups of epochs dispatched before it waits for a group's losses, so the device never
  idles while the host reads them; a group's time then runs from the previous group's losses
  on the host to its own (the first from the start), and their sum is the wall time of the
  whole run. Without it the host waits, then dispatches. Each epoch of a group gets the
  group's mean time. Stops at the first NaN or infinite loss (diverged): the epochs after it
  are not reported, though its group's later epochs have run, and with ``overlap`` up to
  ``AHEAD`` groups more. A trainer whose ``start_epoch`` runs the epoch before it returns
  (``asynchronous`` False: NumPy, per-step sync) is never overlapped, or each epoch would be
  timed with the next ones' work. A trainer with ``start_epochs`` dispatches a group with it.
  """
  overlap = overlap and trainer.asynchronous
  size = sync_every * getattr(trainer, "epochs_per_call", 1)  # A group is whole calls.
  groups = [range(first, min(first + size, epochs)) for first in range(0, epochs, size)]
  if hasattr(trainer, "start_epochs"):
    start = trainer.start_epochs
  else:
    start = lambda group: [trainer.start_epoch(e) for e in group]
  times, losses, pending = [], [], collections.deque()
  t0 = time.perf_counter()
  for i, group in enumerate(groups):
    while len(pending) <= (AHEAD if overlap else 0) and i + len(pending) < len(groups):
      pending.append(start(groups[i + len(pending)]))
    # Reading a value waits for it: a call's losses are an array, one an epoch (a scalar for
    # a trainer of an epoch a call, which may be a framework's tensor: float() reads it).
    group_losses = [float(v) for call in pending.popleft()
                    for v in (np.asarray(call) if getattr(call, "ndim", 0) else [call])]
    arrived = time.perf_counter()
    seconds = (arrived - t0) / len(group)
    for e, loss in zip(group, group_losses):
      times.append(seconds)
      losses.append(loss)
      if log:
        log(e, loss, seconds)
      if not math.isfinite(loss):
        return times, losses  # Diverged: the group's later epochs are not reported.
    t0 = arrived if overlap else time.perf_counter()
  return times, losses


def write_json(result: dict, path: os.PathLike) -> None:
  """Write atomically: a crash mid-write never replaces a good file with a broken one."""
  files.write_atomically(path, json.dumps(result, indent=2) + "\n")


def check_writable(path: os.PathLike, flag: str = "--out") -> None:
  """Fail before training, not after it, if the result file cannot be written. Nothing is left
  behind: a folder made for the check is removed again."""
  if str(path).endswith(("/", os.sep)) or pathlib.Path(path).is_dir():
    raise ConfigError(f"{flag} {path} is a directory; give a file name")
  path = pathlib.Path(path)
  if blocking := next((p for p in path.parents if p.is_file()), None):
    raise ConfigError(f"cannot write {flag} {path}: {blocking} is a file, not a folder")
  made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]  # innermost first
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
      pass
  except OSError as e:
    raise ConfigError(f"cannot write {flag} {path}: {e.strerror or e}") from None
  finally:
    for folder in made:
      try:
        folder.rmdir()
      except OSError:
        break
