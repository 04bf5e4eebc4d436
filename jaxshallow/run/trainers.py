"""Trainers: each holds one model's state and trains it an epoch at a time.

``make_trainer`` picks the trainer of ``cfg.impl``: ``JaxTrainer`` (xla and pallas,
``jax_trainer.py``) or ``NumpyTrainer`` (the CPU reference, here). Both give the same interface
(``compile``, ``run_epoch``, ``start_epoch`` with ``asynchronous``, ``evaluate``,
``get_state``/``set_state``), which is what the runner, the benchmark and the lockstep parity
check use.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from jaxshallow import cnn, data as data_lib, mlp, models, train
from jaxshallow.reference import numpy_cnn, numpy_mlp
from jaxshallow.run.config import Config


def init_params(cfg: Config, ds: data_lib.Dataset, key=None):
  """Initial parameters from ``key``, by default ``jax.random.key(cfg.seed)``: the same start
  for every impl."""
  key = jax.random.key(cfg.seed) if key is None else key
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
  if cfg.impl == "numpy":
    return NumpyTrainer(cfg, ds, params)
  from jaxshallow.run.jax_trainer import JaxTrainer  # Here: that module imports this one.
  return JaxTrainer(cfg, ds, params)


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


class NumpyTrainer(TrainerState):
  """The NumPy CPU reference, in ``cfg.numpy_dtype``."""

  asynchronous = False  # start_epoch returns once the epoch has run.

  def __init__(self, cfg: Config, ds: data_lib.Dataset, params):
    self.cfg, self.ds = cfg, ds
    self.loss = models.BY_NAME[cfg.model].loss
    self.dtype = np.dtype(cfg.numpy_dtype).type
    self.init, self.update = numpy_mlp.make_optimizer(cfg.optimizer, self.dtype(cfg.lr),
                                                      self.dtype(cfg.momentum))
    if cfg.model == "cnn":
      self.grad_fn, self.forward_fn = numpy_cnn.loss_and_grads, numpy_cnn.forward
    else:
      self.grad_fn = functools.partial(numpy_mlp.loss_and_grads, loss=self.loss)
      self.forward_fn = numpy_mlp.forward
    self.set_params(params)

  def compile(self) -> float:
    return 0.0  # Nothing to compile.

  def memory_bytes(self):
    return None  # Host memory; not measured.

  def run_epoch(self, e: int) -> float:
    order = train.epoch_order(self.cfg.seed, e, len(self.ds.train_labels))
    self.params, self.opt_state, loss = numpy_mlp.train_epoch(
        self.params, self.opt_state, self.ds.train_images, self.ds.train_labels, order,
        update=self.update, batch_size=self.cfg.batch_size, dtype=self.dtype,
        grad_fn=self.grad_fn)
    return loss

  def start_epoch(self, e: int) -> float:
    return self.run_epoch(e)  # NumPy runs on the host: nothing to overlap.

  def evaluate(self, split: str = "test") -> dict:
    x, y = ((self.ds.test_images, self.ds.test_labels) if split == "test"
            else (self.ds.train_images, self.ds.train_labels))
    return numpy_mlp.evaluate(self.params, x, y, self.dtype, forward_fn=self.forward_fn,
                              loss=self.loss)

  def get_params(self):
    return self.params

  def set_params(self, params):
    self.params = numpy_mlp.cast(params, self.dtype)
    self.opt_state = self.init(self.params)



def state_leaves(opt_state) -> list[np.ndarray]:
  """An optimizer state as a flat list of host arrays. optax's states and numpy_mlp's hold the
  same leaves in the same order (momentum: one velocity per parameter; adam: the step count,
  then the first and the second moments), so a state can pass between the two kinds."""
  return [np.asarray(leaf) for leaf in jax.tree.leaves(opt_state)]


def with_leaves(opt_state, leaves):
  """``opt_state`` with its leaves replaced by ``leaves``, each cast to the old leaf's type."""
  old, treedef = jax.tree.flatten(opt_state)
  shapes = [np.shape(a) for a in old]
  if shapes != [np.shape(a) for a in leaves]:
    raise ValueError("the optimizer states do not match; are the optimizers the same?")
  cast = [type(o)(n) if isinstance(o, (int, float)) else np.asarray(n, np.asarray(o).dtype)
          for o, n in zip(old, leaves)]
  return jax.tree.unflatten(treedef, cast)
