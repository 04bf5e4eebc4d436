"""The trainer of the numpy impl: the NumPy CPU reference, an epoch at a time."""

from __future__ import annotations

import functools

import numpy as np

from jaxshallow import data as data_lib, models, train
from jaxshallow.reference import numpy_cnn, numpy_mlp
from jaxshallow.run.config import Config
from jaxshallow.run.trainer_base import TrainerState


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
