"""The models jaxshallow trains: how to apply each and which loss it is trained with."""

from __future__ import annotations

from typing import Callable, NamedTuple

from jaxshallow import cnn, mlp


class Model(NamedTuple):
  """Hashable, so it can be a static argument of jitted functions."""
  name: str
  apply: Callable  # (params, x, ops) -> outputs
  features: Callable  # (params, x, ops) -> the input of the last layer, params[-1]
  loss: str  # "xent": softmax cross-entropy on integer labels; "mse": on float targets


MLP = Model("mlp", mlp.apply_mlp, mlp.mlp_features, "xent")
LOGREG = Model("logreg", mlp.apply_mlp, mlp.mlp_features, "xent")  # No hidden layer: 784 -> 10.
CNN = Model("cnn", cnn.apply_cnn, cnn.cnn_features, "xent")
REGRESSION = Model("regression", mlp.apply_mlp, mlp.mlp_features, "mse")
BY_NAME = {m.name: m for m in (MLP, LOGREG, CNN, REGRESSION)}
