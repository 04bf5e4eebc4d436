"""The PyTorch peer of the MLP and the CNN, for the benchmark: same layers, same initial weights,
same batch order, same optimizer (SGD, or SGD with momentum as optax computes it), data resident
on the GPU (uint8, scaled on the device).

mode "eager": one Python-dispatched step per batch. mode "graph": the whole step (batch gather,
forward, backward, SGD update, loss accumulation) captured once in a CUDA graph and replayed;
per step only the batch's indices are copied into the graph's input. modes "compile" and
"compile-max": a PyTorch user's first move for speed, ``torch.compile`` of the whole step
(default mode, and ``mode="max-autotune"``, which also tunes the products and replays CUDA
graphs). The step is written with ``torch.func.grad_and_value`` so that the forward, the
backward, the SGD update and the loss sum are one compiled function with no autograd engine on
the host. Their compile time is the first steps', on copies of the weights.
Losses stay on the GPU until the epoch ends, as in the JAX trainers. Each row runs at the
precision of the JAX row it is compared with.
"""

from __future__ import annotations

import time

import numpy as np


MODES = ("eager", "graph", "compile", "compile-max")


def available() -> str | None:
  """None if the peer can run, else why not (one line)."""
  try:
    import torch  # noqa: F401
  except ImportError:
    return "torch is not installed (pip install -e '.[torch]')"
  return None


class TorchTrainer:
  """The trainer interface of ``jaxshallow.run.trainers`` for a PyTorch model."""

  def __init__(self, cfg, ds, params, mode: str = "graph"):
    import torch
    from jaxshallow import train
    if cfg.model not in ("mlp", "logreg", "cnn") or cfg.optimizer not in ("sgd", "momentum"):
      raise ValueError("the torch peer covers the mlp, logreg and cnn with SGD, with or without "
                       "momentum")
    if mode not in MODES:
      raise ValueError(f"unknown torch peer mode {mode!r}; the modes are {', '.join(MODES)}")
    self.torch, self.cfg, self.mode = torch, cfg, mode
    self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if mode in ("graph", "compile-max") and self.dev.type != "cuda":
      raise ValueError("CUDA graphs need a GPU")
    # The same precision as the JAX row it is compared with: TF32 tensor cores only for tf32,
    # autocast to bfloat16 (products in bfloat16, float32 accumulation) for bfloat16.
    tf32 = cfg.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    self.autocast = cfg.precision == "bfloat16"
    self.x = torch.as_tensor(ds.train_images, device=self.dev)
    self.y = torch.as_tensor(ds.train_labels.astype(np.int64), device=self.dev)
    self.x_test = torch.as_tensor(ds.test_images, device=self.dev)
    self.y_test = torch.as_tensor(ds.test_labels.astype(np.int64), device=self.dev)
    bs = cfg.batch_size
    self.steps = len(ds.train_labels) // bs
    self.orders = [torch.as_tensor(train.epoch_order(cfg.seed, e, len(ds.train_labels))
                                   [:self.steps * bs].astype(np.int64), device=self.dev)
                   .view(self.steps, bs) for e in range(cfg.epochs)]
    self.params = [torch.zeros(1, device=self.dev)]  # Replaced by set_params.
    self.set_params(params)
    self.idx = torch.zeros(bs, dtype=torch.int64, device=self.dev)
    self.loss_sum = torch.zeros((), device=self.dev)
    self.graph = None
    self.step_fn = self._step
    if mode.startswith("compile"):
      # Every trainer compiles afresh (its compile time is its own): the cache is keyed by the
      # code object, which all trainers share, and after 8 recompiles it falls back to eager.
      torch._dynamo.reset()
      # The step updates these in place: static addresses let CUDA graphs replay over them.
      for t in (*self.params, *self.velocity, self.loss_sum, self.idx):
        torch._dynamo.mark_static_address(t)
      self.step_fn = torch.compile(self._functional_step,
                                   mode="max-autotune" if mode == "compile-max" else None)
    if self.dev.type == "cuda":
      torch.cuda.reset_peak_memory_stats()

  # Parameters, in the JAX layout (HWIO convolutions, NHWC flattening) on the way in and out.
  def set_params(self, params):
    torch = self.torch
    tensors = []
    for i, layer in enumerate(params):
      w = np.asarray(layer["w"])
      if w.ndim == 4:
        w = w.transpose(3, 2, 0, 1)  # HWIO -> OIHW
      elif self.cfg.model == "cnn":  # The head: rows from NHWC order to torch's NCHW order.
        c = params[i - 1]["w"].shape[-1]
        side = int(round((w.shape[0] // c) ** 0.5))
        w = w.reshape(side, side, c, -1).transpose(2, 0, 1, 3).reshape(w.shape[0], -1)
      tensors += [torch.tensor(w, device=self.dev), torch.tensor(np.asarray(layer["b"]),
                                                                  device=self.dev)]
    with torch.no_grad():
      if len(self.params) == len(tensors):  # Copy in place: a captured graph keeps its buffers.
        for p, t in zip(self.params, tensors):
          p.copy_(t)
      else:
        self.params = [t.requires_grad_() for t in tensors]
        self.velocity = [torch.zeros_like(t) for t in tensors]
      for v in self.velocity:  # A fresh optimizer state, as in the JAX trainers.
        v.zero_()

  def _logits(self, x_u8, params=None):
    with self.torch.autocast(self.dev.type, dtype=self.torch.bfloat16, enabled=self.autocast):
      return self._logits_in(x_u8, self.params if params is None else params).float()

  def _logits_in(self, x_u8, p):
    F = self.torch.nn.functional
    x = x_u8.float() / 255.0
    if self.cfg.model == "cnn":
      x = F.relu(F.conv2d(x[:, None], p[0], p[1]))
      x = F.max_pool2d(F.relu(F.conv2d(x, p[2], p[3])), 2)
      return x.flatten(1) @ p[4] + p[5]
    x = x.flatten(1)
    for i in range(0, len(p) - 2, 2):
      x = F.relu(x @ p[i] + p[i + 1])
    return x @ p[-2] + p[-1]

  def _loss(self, params):
    idx = self.idx
    return self.torch.nn.functional.cross_entropy(self._logits(self.x[idx], params), self.y[idx])

  def _step(self):
    """The eager and CUDA-graph step: autograd through the tensors' graph."""
    loss = self._loss(self.params)
    self._update(self.torch.autograd.grad(loss, self.params), loss.detach())

  def _functional_step(self):
    """The compiled step: gradients by ``torch.func``, which torch.compile traces whole."""
    grads, loss = self.torch.func.grad_and_value(self._loss)(self.params)
    self._update(grads, loss)

  def _update(self, grads, loss):
    torch = self.torch
    with torch.no_grad():
      if self.cfg.optimizer == "momentum":  # optax's form: v = g + beta v; p -= lr v.
        torch._foreach_mul_(self.velocity, self.cfg.momentum)
        torch._foreach_add_(self.velocity, grads)
        torch._foreach_add_(self.params, self.velocity, alpha=-self.cfg.lr)
      else:
        torch._foreach_add_(self.params, grads, alpha=-self.cfg.lr)
      self.loss_sum += loss

  def compile(self) -> float:
    """The graph mode: warm up on a side stream and capture; the compile modes: the first
    steps, which compile (and, for compile-max, tune and record graphs). The seconds it took;
    the weights are put back after."""
    torch = self.torch
    if self.mode == "eager":
      return 0.0
    t0 = time.perf_counter()
    saved = [p.detach().clone() for p in self.params]
    self.idx.copy_(self.orders[0][0])
    if self.mode.startswith("compile"):
      for _ in range(3):  # cudagraph trees record on the first calls after warm-up
        self.step_fn()
      self._restore(saved)
      return time.perf_counter() - t0
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
      for _ in range(3):
        self._step()
    torch.cuda.current_stream().wait_stream(side)
    self.graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(self.graph):
      self._step()
    self._restore(saved)
    return time.perf_counter() - t0

  def _restore(self, saved):
    """Undoes the warm-up steps: every impl starts from the same weights."""
    torch = self.torch
    with torch.no_grad():
      for p, s in zip(self.params, saved):
        p.copy_(s)
      for v in self.velocity:
        v.zero_()
      self.loss_sum.zero_()
    if self.dev.type == "cuda":
      torch.cuda.synchronize()

  @property
  def asynchronous(self) -> bool:
    """Whether ``start_epoch`` returns before the epoch has run: on a GPU, not on the CPU."""
    return self.dev.type == "cuda"

  def run_epoch(self, e: int) -> float:
    return float(self.start_epoch(e))  # float() waits for the GPU.

  def start_epoch(self, e: int):
    """One epoch, queued on the GPU; its mean loss as a GPU tensor (the next epoch's zeroing
    of the sum comes after this division in the stream)."""
    self.loss_sum.zero_()
    for s in range(self.steps):
      self.idx.copy_(self.orders[e][s])
      if self.graph is not None:
        self.graph.replay()
      else:
        self.step_fn()
    return self.loss_sum / self.steps

  def evaluate(self, split: str = "test") -> dict:
    torch = self.torch
    total, correct, n = 0.0, 0, len(self.y_test)
    with torch.no_grad():
      for start in range(0, n, 2000):
        logits = self._logits(self.x_test[start:start + 2000])
        y = self.y_test[start:start + 2000]
        total += float(torch.nn.functional.cross_entropy(logits, y, reduction="sum"))
        correct += int((logits.argmax(1) == y).sum())
    return {"loss": total / n, "accuracy": correct / n}

  def memory_bytes(self):
    torch = self.torch
    return int(torch.cuda.max_memory_allocated()) if self.dev.type == "cuda" else None

  def get_params(self):
    raise NotImplementedError("the torch peer is for timing, not lockstep comparisons")
