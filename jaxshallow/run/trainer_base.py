"""What every trainer shares: the initial parameters (the same start for every impl) and the
trainer state that lockstep comparisons pass between trainers of different kinds."""

from __future__ import annotations

import jax
import numpy as np

from jaxshallow import cnn, data as data_lib, mlp
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
