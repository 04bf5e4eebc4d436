"""The NumPy CPU reference (``impl="numpy"``): forward, hand-written backward and update.

No JAX here: this module is the ground truth the JAX paths are tested against, and the CPU
baseline they are timed against. Parameters use the same pytree layout as ``jaxshallow.mlp``
(a list of ``{"w", "b"}`` dicts), so one initialisation can feed every impl.

Forward:  z_i = a_{i-1} W_i + b_i,  a_i = ReLU(z_i) for hidden layers,  p = softmax(z_L).
Backward: dz_L = (p - onehot(y)) / B;  dW_i = a_{i-1}^T dz_i;  db_i = sum_rows(dz_i);
          dz_{i-1} = (dz_i W_i^T) * [z_{i-1} > 0].
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


def to_float(images, dtype=np.float32):
  return images.reshape(images.shape[0], -1).astype(dtype) / dtype(255)


def forward(params, x):
  """Logits and the pre-activations the backward pass needs."""
  acts, pre = [x], []
  for i, layer in enumerate(params):
    z = acts[-1] @ layer["w"] + layer["b"]
    pre.append(z)
    if i < len(params) - 1:
      acts.append(np.maximum(z, 0))
  return pre[-1], (acts, pre)


def log_softmax(z):
  z = z - z.max(axis=1, keepdims=True)
  return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def softmax_cross_entropy(logits, labels):
  return -log_softmax(logits)[np.arange(len(labels)), labels].mean()


def loss_and_grads(params, x, labels):
  """Mean cross-entropy loss, its gradients (same layout as ``params``) and the logits."""
  logits, (acts, pre) = forward(params, x)
  logp = log_softmax(logits)
  b = len(labels)
  loss = -logp[np.arange(b), labels].mean()
  dz = np.exp(logp)
  dz[np.arange(b), labels] -= 1
  dz /= b
  grads = [None] * len(params)
  for i in reversed(range(len(params))):
    grads[i] = {"w": acts[i].T @ dz, "b": dz.sum(axis=0)}
    if i > 0:
      dz = (dz @ params[i]["w"].T) * (pre[i - 1] > 0)
  return loss, grads, logits


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


def train_epoch(params, opt_state, images, labels, order, *, update, batch_size, dtype=np.float32):
  """One epoch over ``images[order]`` in full batches; returns params, state and mean loss."""
  steps = len(order) // batch_size
  losses = np.empty(steps)
  for s in range(steps):
    idx = order[s * batch_size:(s + 1) * batch_size]
    loss, grads, _ = loss_and_grads(params, to_float(images[idx], dtype), labels[idx])
    params, opt_state = update(grads, opt_state, params)
    losses[s] = loss
  return params, opt_state, float(losses.mean())


def evaluate(params, images, labels, dtype=np.float32, batch_size=2000):
  total, correct = 0.0, 0
  for start in range(0, len(labels), batch_size):
    x = to_float(images[start:start + batch_size], dtype)
    y = labels[start:start + batch_size]
    logits, _ = forward(params, x)
    total += softmax_cross_entropy(logits, y) * len(y)
    correct += int((logits.argmax(axis=1) == y).sum())
  return {"loss": float(total / len(labels)), "accuracy": correct / len(labels)}
