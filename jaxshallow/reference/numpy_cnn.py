"""The NumPy reference of the CNN (``jaxshallow.cnn``): im2col forward, hand-written backward.

Images NHWC, weights HWIO, the same parameter layout as ``jaxshallow.cnn``. No JAX here.
  conv:  cols = im2col(x) (B, OH, OW, 9*C), tap-major as w.reshape(9*C, Cout);
         y = ReLU(cols @ W + b);  g = dy * [y > 0];  dW = cols^T g;  db = sum(g);
         dx = col2im(g W^T), each tap's slice added back where it was read.
  pool:  y = max over each 2x2 window, remembering which of the four (first maximum on ties);
         dx = dy routed back to that position, 0 elsewhere.
"""

from __future__ import annotations

import numpy as np

from jaxshallow.reference import numpy_mlp

TAPS = [(di, dj) for di in range(3) for dj in range(3)]


def im2col(x):
  _, h, w, _ = x.shape
  return np.concatenate([x[:, di:di + h - 2, dj:dj + w - 2, :] for di, dj in TAPS], axis=-1)


def col2im(dcols, x_shape):
  dx = np.zeros(x_shape, dcols.dtype)
  _, h, w, c = x_shape
  for t, (di, dj) in enumerate(TAPS):
    dx[:, di:di + h - 2, dj:dj + w - 2, :] += dcols[..., t * c:(t + 1) * c]
  return dx


def conv_relu(x, w, b):
  cols = im2col(x)
  y = np.maximum(cols @ w.reshape(-1, w.shape[-1]) + b, 0)
  return y, cols


def conv_relu_backward(dy, y, cols, w, x_shape):
  g = (dy * (y > 0)).reshape(-1, w.shape[-1])
  cols2 = cols.reshape(-1, cols.shape[-1])
  dw = (cols2.T @ g).reshape(w.shape)
  dcols = (g @ w.reshape(-1, w.shape[-1]).T).reshape(cols.shape)
  return col2im(dcols, x_shape), dw, g.sum(axis=0)


def max_pool(x):
  n, h, w, c = x.shape
  oh, ow = h // 2, w // 2
  windows = (x[:, :2 * oh, :2 * ow].reshape(n, oh, 2, ow, 2, c).transpose(0, 1, 3, 2, 4, 5)
             .reshape(n, oh, ow, 4, c))
  arg = windows.argmax(axis=3)  # The first maximum, as XLA and the kernel.
  return np.take_along_axis(windows, arg[:, :, :, None], axis=3)[:, :, :, 0], arg


def max_pool_backward(dy, arg, x_shape):
  n, h, w, c = x_shape
  oh, ow = h // 2, w // 2
  windows = np.zeros((n, oh, ow, 4, c), dy.dtype)
  np.put_along_axis(windows, arg[:, :, :, None], dy[:, :, :, None], axis=3)
  dx = np.zeros(x_shape, dy.dtype)
  dx[:, :2 * oh, :2 * ow] = (windows.reshape(n, oh, ow, 2, 2, c).transpose(0, 1, 3, 2, 4, 5)
                             .reshape(n, 2 * oh, 2 * ow, c))
  return dx


def forward(params, x):
  """Logits and what the backward pass needs, for images (B, H, W) or (B, H, W, 1)."""
  if x.ndim == 3:
    x = x[..., None]
  conv1, conv2, head = params
  y1, cols1 = conv_relu(x, conv1["w"], conv1["b"])
  y2, cols2 = conv_relu(y1, conv2["w"], conv2["b"])
  pooled, arg = max_pool(y2)
  flat = pooled.reshape(len(x), -1)
  return flat @ head["w"] + head["b"], (x, y1, cols1, y2, cols2, arg, flat)


def loss_and_grads(params, x, labels):
  logits, (x, y1, cols1, y2, cols2, arg, flat) = forward(params, x)
  conv1, conv2, head = params
  loss, dz = numpy_mlp.xent_and_grad(logits, labels)
  d_head = {"w": flat.T @ dz, "b": dz.sum(axis=0)}
  dpool = (dz @ head["w"].T).reshape(y2.shape[0], y2.shape[1] // 2, y2.shape[2] // 2, -1)
  dy2 = max_pool_backward(dpool, arg, y2.shape)
  dy1, dw2, db2 = conv_relu_backward(dy2, y2, cols2, conv2["w"], y1.shape)
  _, dw1, db1 = conv_relu_backward(dy1, y1, cols1, conv1["w"], x.shape)
  return loss, [{"w": dw1, "b": db1}, {"w": dw2, "b": db2}, d_head], logits
