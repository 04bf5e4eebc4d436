"""A multi-layer perceptron as pure functions over a pytree of parameters."""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp

from jaxshallow import ops as ops_lib


def init_mlp(key, sizes: Sequence[int], dtype=jnp.float32, bias: bool = True):
  """He-initialised weights (normal, std sqrt(2 / fan_in)) and zero biases, one dict per layer.

  ``sizes`` lists the widths from input to output: (784, 256, 10) is one hidden layer of 256,
  (784, 10) is softmax regression. ``bias=False`` leaves the biases out (``{"w"}`` only).
  """
  if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
    raise ValueError(f"sizes must be at least two positive widths, got {tuple(sizes)}")
  keys = jax.random.split(key, len(sizes) - 1)
  layers = []
  for k, m, n in zip(keys, sizes[:-1], sizes[1:]):
    layer = {"w": jax.random.normal(k, (m, n), dtype) * jnp.sqrt(2.0 / m).astype(dtype)}
    if bias:
      layer["b"] = jnp.zeros((n,), dtype)
    layers.append(layer)
  return layers


def mlp_features(params, x, ops: ops_lib.Ops | None = None):
  """The input of the last layer: ``x`` (B, ...) flattened, through every hidden layer."""
  ops = ops or ops_lib.get_ops("xla")
  x = x.reshape(x.shape[0], -1)
  for layer in params[:-1]:
    x = ops.dense(x, layer["w"], layer.get("b"), relu=True)
  return x


def apply_mlp(params, x, ops: ops_lib.Ops | None = None):
  """Outputs for a batch ``x`` of shape (B, ...); trailing dimensions are flattened."""
  ops = ops or ops_lib.get_ops("xla")
  return ops.dense(mlp_features(params, x, ops), params[-1]["w"], params[-1].get("b"))
