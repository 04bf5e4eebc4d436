"""The synthetic regression data of the shallow-network study: y = sum(x_i^2) + noise."""

from __future__ import annotations

import numpy as np

from jaxshallow.data import Dataset

SIZES = {"small": 256, "medium": 2560, "large": 25600}
DIM = 32  # Inputs per example.
N_TEST = 2560


def make_regression(n: int, rng: np.random.Generator, dim: int = DIM, noise: float = 0.1):
  """``n`` inputs uniform in [-1, 1]^dim and targets sum(x^2) + N(0, noise^2), float32."""
  x = rng.uniform(-1.0, 1.0, (n, dim))
  y = np.sum(x * x, axis=1) + noise * rng.standard_normal(n)
  return x.astype(np.float32), y.astype(np.float32)


def load(size: str, seed: int = 0) -> Dataset:
  """The ``size`` training set (small 256, medium 2,560, large 25,600 samples) and a held-out
  set of 2,560, both drawn from ``seed``: the same seed gives the same data."""
  train = make_regression(SIZES[size], np.random.default_rng([seed, 0]))
  test = make_regression(N_TEST, np.random.default_rng([seed, 1]))
  return Dataset(train[0], train[1], test[0], test[1])
