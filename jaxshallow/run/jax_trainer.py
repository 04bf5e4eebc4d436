"""The trainer of the xla, pallas and triton impls: the model state on the device, one compiled
call of one or several epochs."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent import futures

import jax
import jax.numpy as jnp
import numpy as np

from jaxshallow import compile_cache, data as data_lib, models, paths, train
from jaxshallow.run.config import Config, ConfigError
from jaxshallow.run.trainer_base import TrainerState, layer_sizes


# Settings that reach the compiled epoch only as argument values (the data, the order, the
# initial weights) or not at all: runs that differ only in them share its cache entry.
NOT_IN_PROGRAM = {"seed", "epochs", "data_dir", "dataset", "train_limit", "test_limit",
                  "holdout", "sync_every", "overlap", "given", "compilation_cache", "devices",
                  "numpy_dtype", "epochs_per_call"}
# With --epochs_per_call=0, epochs go into one call until it holds about this many steps: an
# epoch of MNIST at batch 64 (937 steps) is a call of its own, the regression net's small and
# medium sets (1 and 10 steps) train all their epochs in one.
STEPS_PER_CALL = 1000


def epochs_per_call(cfg: Config, steps: int) -> int:
  """The epochs of one compiled call: ``cfg.epochs_per_call``, or, for 0, the largest divisor
  of the epochs with at most ``STEPS_PER_CALL`` steps in all (at least 1), so that every call
  has the same shape and one compile serves the run."""
  if cfg.epochs_per_call:
    return min(cfg.epochs_per_call, cfg.epochs)
  if cfg.dispatch != "scan" or cfg.data_parallel:
    return 1
  most = max(1, STEPS_PER_CALL // max(steps, 1))
  return max(k for k in range(1, min(most, cfg.epochs) + 1) if cfg.epochs % k == 0)


class JaxTrainer(TrainerState):
  """xla and pallas. By default the data are resident on the device and a call of
  ``epochs_per_call`` epochs is one compiled ``lax.scan``; ``cfg.dispatch``, ``placement``,
  ``donate`` and ``sync`` switch to the slower ways, so each technique can be measured on its
  own."""

  def __init__(self, cfg: Config, ds: data_lib.Dataset, params):
    self.cfg, self.ds = cfg, ds
    self.tx = train.make_optimizer(cfg.optimizer, cfg.lr, cfg.momentum)
    self.mesh = _data_parallel_mesh(cfg) if cfg.data_parallel else None
    self.set_params(params)
    self.data = {"train": self._put((ds.train_images, ds.train_labels)),
                 "test": self._put((ds.test_images, ds.test_labels))}
    orders = [train.epoch_order(cfg.seed, e, len(ds.train_labels)) for e in range(cfg.epochs)]
    steps, bs = len(ds.train_labels) // cfg.batch_size, cfg.batch_size
    self.epochs_per_call = k = epochs_per_call(cfg, steps)
    if cfg.dispatch == "scan":
      # One array a call: its epoch's order, or for k > 1 its epochs' orders a row (the last
      # call may hold fewer, where a given k does not divide the epochs: it compiles once more).
      self.orders = [self._put(np.stack(orders[i:i + k]) if k > 1 else orders[i])
                     for i in range(0, cfg.epochs, k)]
    elif cfg.placement == "resident":  # Each step's indices on the device before timing.
      self.orders = [[jax.device_put(o[s * bs:(s + 1) * bs]) for s in range(steps)]
                     for o in orders]
    else:
      self.orders = [[o[s * bs:(s + 1) * bs] for s in range(steps)] for o in orders]
    self.static = dict(impl=paths.ops_impl(cfg),
                       precision=cfg.precision, model=models.BY_NAME[cfg.model],
                       blocks=cfg.blocks)
    self.eval_static = {**self.static, "impl": paths.eval_impl(cfg)}
    self.fn, self.tune_time_s, self.eval_fns = None, 0.0, {}
    self.fn_last = self.fn_one = None  # Compiled only where a run needs them.

  def _autotune(self):
    """Tune the Pallas dense kernels for this model's shapes before the first trace."""
    from pallas_kernels import autotune
    t0 = time.perf_counter()
    for m, k, n, relu in dense_shapes(self.cfg, self.ds):
      autotune.tune_dense(m, k, n, relu, self.cfg.precision)
    self.tune_time_s = time.perf_counter() - t0

  def compile(self) -> float:
    """Compile ahead of time the training's program and, beside it in a second thread, the
    evaluation's (``compile_evaluation``); returns the seconds until both were done (autotuning
    not included). Side by side because XLA's compile releases the GIL; the evaluation lowered
    first (tracing takes turns, ``compile_cache.TRACING``), since on the GPU its XLA compile
    is longer than a Pallas kernel's and runs while the kernel lowers
    (docs/design/time_to_result.md)."""
    if self.cfg.blocks == "auto":
      self._autotune()
    t0 = time.perf_counter()
    lowered = threading.Event()  # The evaluation's first program

    def evaluation_first():
      try:
        self.compile_evaluation(lowered)
      finally:
        lowered.set()
    with futures.ThreadPoolExecutor(1) as pool:
      evaluation = pool.submit(evaluation_first) if self.mesh is None else None
      if evaluation is not None:
        lowered.wait()
        if evaluation.done():  # Failed before lowering anything: say so now.
          evaluation.result()
      self._compile_training()
    if evaluation is not None:
      evaluation.result()  # Its error, if any, here.
    return time.perf_counter() - t0

  def compile_evaluation(self, lowered: threading.Event | None = None) -> None:
    """The evaluation's chunk shapes of the splits the run evaluates (the test split; the
    regression net's training set too), compiled into ``eval_fns``; ``lowered`` set once the
    first is lowered."""
    splits = ("test", "train") if self.cfg.model == "regression" else ("test",)
    for split in splits:
      x, y = self.data[split]
      n = y.shape[0]
      for size in sorted({min(train.EVAL_BATCH, n - start)
                          for start in range(0, n, train.EVAL_BATCH)}):
        with compile_cache.TRACING:  # An eager slice is a program too.
          chunk = x[:size], y[:size]
        self._eval_fn(*chunk, lowered=lowered)

  def _eval_fn(self, x, y, lowered: threading.Event | None = None):
    """The compiled evaluation of a chunk of ``x``'s shape (compiled at its first use)."""
    if x.shape not in self.eval_fns:
      self.eval_fns[x.shape] = compile_cache.compile(
          train.eval_batch_jit, (self.params, x, y), self.eval_static, what="the evaluation",
          settings=self._settings("evaluation"), exportable=self.cfg.impl != "triton",
          lowered=lowered)
    return self.eval_fns[x.shape]

  def _compile_training(self) -> None:
    if self.mesh is not None:
      from jaxshallow.devices import data_parallel
      self.fn = compile_cache.lower_and_compile(
          data_parallel.train_epoch, self.params, self.opt_state, *self.data["train"],
          self.orders[0], tx=self.tx, batch_size=self.cfg.batch_size, the_mesh=self.mesh,
          **self.static)
    elif self.cfg.dispatch == "scan":
      self.fn = self._compile_scan(self.orders[0])
      if self.orders[-1].shape != self.orders[0].shape:  # A shorter last call.
        self.fn_last = self._compile_scan(self.orders[-1])
    else:
      streamed = self.cfg.placement == "streamed"
      step = train.jit_step(train.step_on_batch if streamed else train.step_on_indices,
                            self.cfg.donate)
      example = (self._host_batch(self.orders[0][0]) if streamed
                 else (*self.data["train"], self.orders[0][0]))
      self.fn = compile_cache.lower_and_compile(step, self.params, self.opt_state, *example,
                                                tx=self.tx, **self.static)

  def _compile_scan(self, orders):
    """The compiled epoch (``orders`` of one epoch) or epochs (one epoch's order a row)."""
    several = orders.ndim == 2
    if several:
      fn = train.train_epochs if self.cfg.donate else train.train_epochs_no_donate
    else:
      fn = train.train_epoch if self.cfg.donate else train.train_epoch_no_donate
    what = f"the {self.cfg.impl} epoch" + ("s" if several else "")
    if self.cfg.impl == "pallas":
      what += f" on the {paths.describe(self.cfg)}"
    return compile_cache.compile(
        fn, (self.params, self.opt_state, *self.data["train"], orders),
        dict(tx=self.tx, batch_size=self.cfg.batch_size, unroll=self.cfg.unroll,
             fusion=self.cfg.fusion or "ops", **self.static),
        donate=(0, 1) if self.cfg.donate else (),
        settings=self._settings("epochs" if several else "epoch"),
        exportable=self.cfg.impl != "triton", what=what)

  def _settings(self, program: str) -> str | None:
    """What, beside the arguments' shapes and the source, makes this trainer's ``program``:
    every setting but those that only reach it as argument values or not at all (the cache
    key of ``compile_cache``). None (key by the traced program) with autotuned blocks, whose
    values come from the autotuner's own cache."""
    if self.cfg.blocks == "auto":
      return None
    kept = {k: v for k, v in dataclasses.asdict(self.cfg).items() if k not in NOT_IN_PROGRAM}
    return f"{program} {sorted(kept.items())}"

  def memory_bytes(self) -> int | None:
    """Device memory of the compiled function: arguments + outputs + temporaries - aliased."""
    try:
      m = self.fn.memory_analysis()
      return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
                 - m.alias_size_in_bytes)
    except Exception:  # noqa: BLE001 -- not every backend reports it.
      return None

  def _host_batch(self, idx):
    return jax.device_put((self.ds.train_images[idx], self.ds.train_labels[idx]))

  @property
  def asynchronous(self) -> bool:
    """Whether ``start_epoch`` returns before the epoch has run (not with per-step sync)."""
    return self.cfg.sync != "step"

  def run_epoch(self, e: int) -> float:
    """One epoch; returns its mean training loss once it is on the host."""
    return float(self.start_epoch(e))

  def start_epochs(self, epochs: range) -> list:
    """``epochs`` (whole calls of ``epochs_per_call``, from a multiple of it), dispatched;
    returns their mean training losses as device values, one array a call, so that the host can
    dispatch more before it waits (``overlap``, ``sync_every``)."""
    k = self.epochs_per_call
    if k == 1:
      return [self.start_epoch(e) for e in epochs]
    if epochs.start % k:
      raise ValueError(f"calls hold {k} epochs: start at a multiple of {k}, not {epochs.start}")
    losses = []
    for c in range(epochs.start // k, -(-epochs.stop // k)):
      fn = self.fn if self.orders[c].shape == self.orders[0].shape else self._last_call_fn()
      self.params, self.opt_state, metrics = fn(
          self.params, self.opt_state, *self.data["train"], self.orders[c])
      losses.append(metrics["loss"])
    return losses

  def _last_call_fn(self):
    if self.fn_last is None:  # Compiled by compile(), unless the caller replaced self.fn.
      self.fn_last = self._compile_scan(self.orders[-1])
    return self.fn_last

  def _one_epoch_fn(self):
    """An epoch a call, for ``start_epoch`` where calls hold several: compiled when first
    asked, so inside whatever the caller times (lockstep comparisons ask for calls of one)."""
    if self.fn_one is None:
      self.fn_one = self._compile_scan(self.orders[0][0])
    return self.fn_one

  def start_epoch(self, e: int):
    """One epoch, dispatched; returns its mean training loss as a device value, so that
    the host can dispatch more epochs before it waits (``overlap``, ``sync_every``)."""
    if self.cfg.dispatch == "scan":
      k = self.epochs_per_call
      if k == 1:
        fn, order = self.fn, self.orders[e]
      else:  # Row e % k of its call's orders.
        fn, order = self._one_epoch_fn(), self.orders[e // k][e % k]
      self.params, self.opt_state, metrics = fn(
          self.params, self.opt_state, *self.data["train"], order)
      return metrics["loss"]
    losses, streamed = [], self.cfg.placement == "streamed"
    batches = self.orders[e]
    nxt = self._host_batch(batches[0]) if streamed else None
    for s, idx in enumerate(batches):
      if streamed:  # Start the next batch's copy before this step runs: they overlap.
        cur, nxt = nxt, (self._host_batch(batches[s + 1]) if s + 1 < len(batches) else None)
        args = cur
      else:
        args = (*self.data["train"], idx)
      self.params, self.opt_state, metrics = self.fn(self.params, self.opt_state, *args)
      losses.append(float(metrics["loss"]) if self.cfg.sync == "step" else metrics["loss"])
    if self.cfg.sync == "step":
      return float(np.mean(losses))  # Already on the host: nothing to send back.
    return jnp.mean(jnp.stack(losses))

  def evaluate(self, split: str = "test") -> dict:
    """Mean loss (and accuracy) over ``split``, in chunks of ``train.EVAL_BATCH`` examples, each
    chunk's shape compiled once (through the compilation cache, as the epoch; by ``compile``,
    where the caller compiled ahead)."""
    if self.mesh is not None:
      return train.evaluate(self.params, *self.data[split], **self.eval_static)

    def chunk(x, y):
      return self._eval_fn(x, y)(self.params, x, y)
    return train.evaluate_in_chunks(chunk, *self.data[split], model=self.static["model"],
                                    batch_size=train.EVAL_BATCH)

  def get_params(self):
    return jax.tree.map(np.asarray, self.params)

  def set_params(self, params):
    """Start again from ``params`` with a fresh optimizer state. Host arrays are copied to the
    device, so the caller's copy survives the donation of the trainer's buffers."""
    self.params = self._put(params)
    self.opt_state = self.tx.init(self.params)

  def _put(self, tree):
    """To the device; with --data_parallel, a copy on every device of the mesh."""
    if self.mesh is None:
      return jax.device_put(tree)
    from jaxshallow.devices import placement
    return placement.replicate(jax.tree.map(np.asarray, tree), self.mesh)


def _data_parallel_mesh(cfg: Config):
  from jaxshallow.devices import data_parallel
  the_mesh = data_parallel.mesh(cfg.devices)
  if cfg.batch_size % the_mesh.size:
    raise ConfigError(f"--data_parallel: batch_size {cfg.batch_size} must be a multiple "
                             f"of the {the_mesh.size} devices")
  return the_mesh


def dense_shapes(cfg: Config, ds: data_lib.Dataset):
  """(m, k, n, relu) of every dense layer of the model at this batch size."""
  if cfg.model == "cnn":
    side = (ds.train_images.shape[1] - 4) // 2
    return [(cfg.batch_size, side * side * 32, 10, False)]
  sizes = layer_sizes(cfg, ds)
  return [(cfg.batch_size, k, n, i < len(sizes) - 2)
          for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:]))]
