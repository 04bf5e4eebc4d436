"""The NumPy CPU reference (``impl="numpy"``): forward, hand-written backward and update.

No JAX here: this module is the ground truth the JAX paths are tested against, and the CPU
baseline they are timed against. Parameters use the same pytree layout as ``jaxshallow.mlp``
(a list of ``{"w", "b"}`` dicts), so one initialisation can feed every impl.

Forward:  z_i = a_{i-1} W_i + b_i,  a_i = ReLU(z_i) for hidden layers,  p = softmax(z_L).
Backward: dz_L = (p - onehot(y)) / B  (or 2 (z_L - y) / B for mean squared error);
          dW_i = a_{i-1}^T dz_i;  db_i = sum_rows(dz_i);  dz_{i-1} = (dz_i W_i^T) * [z_{i-1} > 0].
Layers without a "b" entry have no bias. The CNN's reference is ``numpy_cnn``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def init_mlp(rng: np.random.Generator, sizes: Sequence[int], dtype=np.float32):
  """He-initialised weights and zero biases, drawn with NumPy."""
  return [{"w": (rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(dtype),
           "b": np.zeros((n,), dtype)} for m, n in zip(sizes[:-1], sizes[1:])]


def cast(params, dtype):
  return [{k: np.asarray(v, dtype=dtype) for k, v in layer.items()} for layer in params]


def to_float(x, dtype=np.float32):
  """uint8 pixels to [0, 1], times 1/255 in ``dtype`` (in float32 the jax impls' bits); other
  inputs cast to ``dtype``."""
  if x.dtype == np.uint8:
    return x.astype(dtype) * dtype(1 / 255)
  return x.astype(dtype)


def forward(params, x):
  """Outputs and the activations the backward pass needs; ``x`` is flattened per example."""
  acts, pre = [x.reshape(x.shape[0], -1)], []
  for i, layer in enumerate(params):
    z = acts[-1] @ layer["w"]
    if "b" in layer:
      z = z + layer["b"]
    pre.append(z)
    if i < len(params) - 1:
      acts.append(np.maximum(z, 0))
  return pre[-1], (acts, pre)


def log_softmax(z):
  z = z - z.max(axis=1, keepdims=True)
  return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def softmax_cross_entropy(logits, labels):
  return -log_softmax(logits)[np.arange(len(labels)), labels].mean()


def xent_and_grad(logits, labels):
  """Mean softmax cross-entropy and its gradient with respect to the logits."""
  logp = log_softmax(logits)
  b = len(labels)
  dz = np.exp(logp)
  dz[np.arange(b), labels] -= 1
  return -logp[np.arange(b), labels].mean(), dz / b


def mse_and_grad(pred, target):
  """Mean squared error of the (B, 1) predictions and its gradient."""
  d = pred[:, 0] - target
  return np.mean(d * d), (2 * d / len(d))[:, None].astype(pred.dtype)


LOSSES = {"xent": xent_and_grad, "mse": mse_and_grad}


def dense_backward(params, acts, pre, dz):
  """Gradients of every layer given the gradient ``dz`` at the output."""
  grads = [None] * len(params)
  for i in reversed(range(len(params))):
    grads[i] = {"w": acts[i].T @ dz}
    if "b" in params[i]:
      grads[i]["b"] = dz.sum(axis=0)
    if i > 0:
      dz = (dz @ params[i]["w"].T) * (pre[i - 1] > 0)
  return grads, dz


def loss_and_grads(params, x, y, loss="xent"):
  """Mean loss, its gradients (same layout as ``params``) and the outputs."""
  out, (acts, pre) = forward(params, x)
  value, dz = LOSSES[loss](out, y)
  return value, dense_backward(params, acts, pre, dz)[0], out


# Optimizers with optax's update rules, as (init, update) pairs over the params list.
def _zeros_like(params):
  return [{k: np.zeros_like(v) for k, v in layer.items()} for layer in params]


def sgd(lr):
  def update(grads, state, params):
    return [{k: p[k] - lr * g[k] for k in p} for p, g in zip(params, grads)], state
  return (lambda params: ()), update


def momentum(lr, beta=0.9):
  def update(grads, state, params):
    state = [{k: g[k] + beta * v[k] for k in g} for g, v in zip(grads, state)]
    return [{k: p[k] - lr * v[k] for k in p} for p, v in zip(params, state)], state
  return _zeros_like, update


def adam(lr, b1=0.9, b2=0.999, eps=1e-8):
  def init(params):
    return (0, _zeros_like(params), _zeros_like(params))

  def update(grads, state, params):
    t, mu, nu = state
    t += 1
    mu = [{k: b1 * m[k] + (1 - b1) * g[k] for k in g} for g, m in zip(grads, mu)]
    nu = [{k: b2 * v[k] + (1 - b2) * g[k] ** 2 for k in g} for g, v in zip(grads, nu)]
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    new = [{k: p[k] - lr * (m[k] / c1) / (np.sqrt(v[k] / c2) + eps) for k in p}
           for p, m, v in zip(params, mu, nu)]
    return new, (t, mu, nu)
  return init, update


def make_optimizer(name: str = "sgd", lr: float = 0.1, beta: float = 0.9):
  if name == "sgd":
    return sgd(lr)
  if name == "momentum":
    return momentum(lr, beta)
  if name == "adam":
    return adam(lr)
  raise ValueError(f"unknown optimizer {name!r}")


def train_epoch(params, opt_state, images, labels, order, *, update, batch_size, dtype=np.float32,
                grad_fn=loss_and_grads):
  """One epoch over ``images[order]`` in full batches; returns params, state and mean loss.
  ``grad_fn(params, x, y) -> (loss, grads, outputs)`` is the model's hand-written backward."""
  steps = len(order) // batch_size
  losses = np.empty(steps)
  for s in range(steps):
    idx = order[s * batch_size:(s + 1) * batch_size]
    loss, grads, _ = grad_fn(params, to_float(images[idx], dtype), labels[idx])
    params, opt_state = update(grads, opt_state, params)
    losses[s] = loss
  return params, opt_state, float(losses.mean())


def evaluate(params, images, labels, dtype=np.float32, batch_size=2000, forward_fn=forward,
             loss="xent"):
  """Mean loss (and accuracy, for classifiers) over a whole data set."""
  total, correct = 0.0, 0
  for start in range(0, len(labels), batch_size):
    x = to_float(images[start:start + batch_size], dtype)
    y = labels[start:start + batch_size]
    out, _ = forward_fn(params, x)
    total += LOSSES[loss](out, y)[0] * len(y)
    correct += int((out.argmax(axis=1) == y).sum())
  result = {"loss": float(total / len(labels))}
  if loss == "xent":
    result["accuracy"] = correct / len(labels)
  return result
