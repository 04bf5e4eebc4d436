"""The small CNN of the MNIST studies, as pure functions.

conv 3x3 1->16 valid + ReLU (26x26) -> conv 3x3 16->32 valid + ReLU (24x24) -> max-pool 2x2
(12x12) -> flatten 4608 -> dense 10. 50,890 parameters, He-initialised, zero biases.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxshallow import ops as ops_lib

CHANNELS = (1, 16, 32)


def init_cnn(key, image_size: int = 28, n_classes: int = 10, dtype=jnp.float32):
  k1, k2, k3 = jax.random.split(key, 3)
  he = lambda k, shape, fan_in: jax.random.normal(k, shape, dtype) * jnp.sqrt(2.0 / fan_in)
  (c0, c1, c2) = CHANNELS
  flat = ((image_size - 4) // 2) ** 2 * c2
  return [
      {"w": he(k1, (3, 3, c0, c1), 9 * c0), "b": jnp.zeros((c1,), dtype)},
      {"w": he(k2, (3, 3, c1, c2), 9 * c1), "b": jnp.zeros((c2,), dtype)},
      {"w": he(k3, (flat, n_classes), flat), "b": jnp.zeros((n_classes,), dtype)},
  ]


def cnn_features(params, x, ops: ops_lib.Ops | None = None):
  """The input of the dense head: images (B, H, W) or (B, H, W, 1) through conv, conv, pool,
  flattened (NHWC order). The images get no gradient."""
  ops = ops or ops_lib.get_ops("xla")
  if x.ndim == 3:
    x = x[..., None]
  conv1, conv2, _ = params
  x = ops.conv_stack(x, conv1["w"], conv1["b"], conv2["w"], conv2["b"])
  return x.reshape(x.shape[0], -1)


def apply_cnn(params, x, ops: ops_lib.Ops | None = None):
  """Logits for a batch of images."""
  ops = ops or ops_lib.get_ops("xla")
  return ops.dense(cnn_features(params, x, ops), params[-1]["w"], params[-1]["b"])
