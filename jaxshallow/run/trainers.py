"""Trainers: each holds one model's state and trains it a call of epochs at a time.

``make_trainer`` picks the trainer of ``cfg.impl``: ``JaxTrainer`` (xla, pallas and triton,
``jax_trainer``) or ``NumpyTrainer`` (the CPU reference, ``numpy_trainer``). Both give the same
interface (``compile``, ``run_epoch``, ``start_epoch`` with ``asynchronous``, ``evaluate``,
``get_state``/``set_state``), which is what the runner, the benchmark and the lockstep parity
check use; ``JaxTrainer`` adds ``epochs_per_call`` and ``start_epochs`` (a call of several
epochs), which the runner uses where a trainer has them.
"""

from __future__ import annotations

from jaxshallow import compile_cache, data as data_lib, models, paths, train
from jaxshallow.run.config import Config
from jaxshallow.run.jax_trainer import JaxTrainer
from jaxshallow.run.numpy_trainer import NumpyTrainer
from jaxshallow.run.trainer_base import init_params, layer_sizes  # noqa: F401 (the API)


def make_trainer(cfg: Config, ds: data_lib.Dataset, params=None):
  """The trainer of ``cfg.impl``, holding the model state; ``cfg`` must be resolved
  (``config.resolve``); pallas trains on the path ``paths`` picks where ``cfg.fusion`` is None.
  ``params`` (host or device arrays) default to ``init_params(cfg, ds)``. Switches the
  compilation cache on as ``cfg.compilation_cache`` says (``compile_cache``)."""
  if cfg.impl != "numpy":
    compile_cache.enable(cfg.compilation_cache)
  if params is None:
    params = init_params(cfg, ds)
  if models.BY_NAME[cfg.model].loss == "xent":  # Once per data set, on the host.
    n_classes = params[-1]["w"].shape[1]
    train.check_labels(ds.train_labels, n_classes, "the training labels")
    train.check_labels(ds.test_labels, n_classes, "the test labels")
  if cfg.impl == "numpy":
    return NumpyTrainer(cfg, ds, params)
  return JaxTrainer(paths.resolve(cfg), ds, params)
