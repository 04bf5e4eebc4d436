"""What one training run is: the Config, its per-model defaults, and its validation.

Every setting a user can get wrong is checked here, before any data is loaded or anything is
compiled, and reported as a ``ConfigError`` whose message is one line meant for the user.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxshallow import data as data_lib

MODELS = ("mlp", "logreg", "cnn", "regression")
# Per-model defaults, filled in where a Config leaves None.
DEFAULTS = {
    "mlp": dict(optimizer="sgd", epochs=10, batch_size=64, bias=True),
    "logreg": dict(optimizer="sgd", epochs=10, batch_size=64, bias=True),
    "cnn": dict(optimizer="momentum", epochs=5, batch_size=64, bias=True),
    "regression": dict(optimizer="sgd", epochs=100, batch_size=256, bias=False),
}
# Default learning rates by model and optimizer. The classifiers' reach the workloads' accuracy
# targets and the cnn's were chosen on a training-set holdout (docs/usage.md); the regression's
# is the study's. A pair not listed needs --lr.
LEARNING_RATES = {
    ("mlp", "sgd"): 0.5,
    ("logreg", "sgd"): 0.25,
    ("cnn", "momentum"): 0.02,
    ("cnn", "sgd"): 0.15,
    ("regression", "sgd"): 0.002,
}


class ConfigError(ValueError):
  """A bad setting; the message is one line meant for the user."""


def setting(default, help: str, *, flag: bool = True, applies=None):
  """A field of ``Config`` with its help text: the one place a setting is written. The
  experiment scripts make an absl flag of each field whose ``flag`` is True
  (``experiments.config_flags``); the help says "default: the model's" for per-model ones.
  ``applies``: (predicate of the Config, what it applies to) for a setting that only some
  configurations use; given where it does not apply (``Config.given``), it is refused."""
  return dataclasses.field(default=default,
                           metadata={"help": help, "flag": flag, "applies": applies})


def _optimizer(cfg) -> str:
  return cfg.optimizer or DEFAULTS[cfg.model]["optimizer"]


# Seeds are NumPy's and jax.random's: non-negative, and within 32 bits for both.
MAX_SEED = 2**32 - 1
FLOAT32_MAX = float(np.finfo(np.float32).max)


def seed_problem(flag: str, seed: int) -> str | None:
  """Why ``seed`` cannot seed a run (one line), or None."""
  if not 0 <= seed <= MAX_SEED:
    return f"{flag} must be an integer from 0 to {MAX_SEED}, got {seed}"
  return None


@dataclasses.dataclass(frozen=True)
class Config:
  """One training run. A field left None takes the model's default (``DEFAULTS``,
  ``LEARNING_RATES``) in ``resolve``."""
  impl: str = setting("xla", "xla | pallas | triton (GPU, jax-triton) | numpy")
  model: str = setting("mlp", "mlp | logreg | cnn")
  dataset: str = setting("mnist", "mnist | fashion (the regression model: small | medium | "
                         "large)")
  epochs: int | None = setting(None, "Passes over the training set")
  batch_size: int | None = setting(None, "Examples per step")
  lr: float | None = setting(None, "Learning rate")
  optimizer: str | None = setting(None, "sgd | momentum | adam")
  momentum: float = setting(0.9, "Momentum, for --optimizer=momentum.", applies=(
      lambda c: _optimizer(c) == "momentum", "applies to --optimizer=momentum"))
  hidden: tuple[int, ...] = setting((256,), "Hidden widths, comma separated: 512,256 is two "
                                    "(mlp and regression).", applies=(
      lambda c: c.model in ("mlp", "regression"),
      "applies to the mlp and the regression net (the other models' layers are fixed)"))
  bias: bool | None = setting(None, "Give the layers biases", flag=False)
  seed: int = setting(0, "Seeds the initial weights and the batch order.")
  precision: str = setting("float32", "float32 | tf32 | bfloat16 (xla, pallas).")
  numpy_dtype: str = setting("float32", "float32 | float64 (numpy impl).", applies=(
      lambda c: c.impl == "numpy", "applies to --impl=numpy"))
  data_dir: str | None = setting(None, "Folder with the data; else $JAXSHALLOW_DATA_DIR, then "
                                 "the user cache, then a download.", applies=(
      lambda c: c.model != "regression",
      "applies to mnist and fashion (the regression net's data are drawn from --seed)"))
  train_limit: int | None = setting(None, "Use only the first N training images.")
  test_limit: int | None = setting(None, "Use only the first N test images.")
  # Choosing settings (experiments.sweep) never looks at the test set.
  holdout: int = setting(0, "Hold out the last N training examples and evaluate on them "
                         "instead of the test set.", flag=False)
  # Techniques (xla and pallas): docs/usage.md has their table.
  dispatch: str = setting("scan", "scan: each epoch is one compiled loop; loop: a Python loop "
                          "over a jitted step.")
  unroll: int = setting(1, "Steps unrolled per iteration of the epoch loop.", applies=(
      lambda c: c.dispatch == "scan", "applies to --dispatch=scan"))
  placement: str = setting("resident", "resident: data on the device; streamed: batches "
                           "copied from the host, the next one prefetched (needs "
                           "--dispatch=loop).")
  donate: bool = setting(True, "Donate params and optimizer state to each update.")
  sync: str = setting("epoch", "epoch: fetch the loss once an epoch; step: after every step "
                      "(needs --dispatch=loop).")
  sync_every: int = setting(1, "With --sync=epoch: bring the losses to the host every N calls "
                            "(of --epochs_per_call epochs) only.")
  epochs_per_call: int = setting(0, "Epochs compiled into one call, their losses brought back "
                                 "together (--dispatch=scan); 0: as many as make about 1,000 "
                                 "steps a call, a divisor of --epochs (1 for MNIST at batch 64).",
                                 applies=(
      lambda c: c.dispatch == "scan" or c.epochs_per_call <= 1,
      "needs --dispatch=scan (a loop dispatches each step)"))
  overlap: bool = setting(True, "Dispatch the next two calls before waiting for this one's "
                          "losses (the host two calls behind the device); --nooverlap: wait, "
                          "then dispatch.")
  blocks: str | None = setting(None, "Pallas dense block sizes BM,BN,BK, or auto.")
  fusion: str | None = setting(None, "pallas: epoch (the whole epoch in one kernel; the default "
                               "for the MLP family; in a population, the streamed kernel or a "
                               "cluster a member on Hopper where they take the network, else "
                               "the population step kernels), step (the cnn's default: a step of "
                               "Pallas kernels alone, the optimizer in one of them; in a "
                               "population, the population step kernels), ops (one step per scan "
                               "iteration through the op kernels and optax) or xla (no Pallas "
                               "kernel: xla's step); unset: jaxshallow.paths picks, xla only "
                               "where every Pallas path measured slower (a population on a GPU "
                               "that no one-launch kernel trains: xla).")
  data_parallel: bool = setting(False, "Split each step's batch over the devices, gradients "
                                "all-reduced (xla, pallas op kernels).")
  devices: int = setting(0, "Devices to use (0: all): for --data_parallel, and for the "
                         "population of experiments.sweep.")
  compilation_cache: str | None = setting(None, "Folder kept between runs with the compiled "
                                         "epochs (default: $JAXSHALLOW_COMPILATION_CACHE, else "
                                         "the user cache's jaxshallow/compiled); off: none.")
  # The settings the user gave on the command line (``experiments.config_flags``): each one is
  # refused where it does not apply (``setting``'s ``applies``), never silently ignored.
  given: tuple[str, ...] = setting((), "Settings given explicitly.", flag=False)


def help_text(field: dataclasses.Field) -> str:
  """A setting's help, with the models' defaults where they differ by model."""
  text = field.metadata["help"]
  by_model = {m: d[field.name] for m, d in DEFAULTS.items() if field.name in d}
  if by_model:
    models = ", ".join(f"{m} {v}" for m, v in by_model.items())
    return f"{text}; default: the model's ({models})."
  if field.name == "lr":
    pairs = ", ".join(f"{m} {o} {v}" for (m, o), v in LEARNING_RATES.items())
    return f"{text}; default: the model's for the optimizer ({pairs})."
  return text


def _datasets(model: str):
  from jaxshallow import synthetic
  return tuple(synthetic.SIZES) if model == "regression" else tuple(data_lib.DATASETS)


def validate(cfg: Config) -> None:
  from jaxshallow import compile_cache, ops, train  # Keep the module import light.
  positive = lambda v: v is None or v >= 1
  checks = [
      (cfg.impl in ops.IMPLS, f"unknown impl {cfg.impl!r}; choose one of {', '.join(ops.IMPLS)}"),
      (not (bad_seed := seed_problem("seed", cfg.seed)), bad_seed),
      (cfg.data_dir is None or cfg.data_dir.strip() != "", "data_dir must name a folder"),
      (cfg.model in MODELS, f"unknown model {cfg.model!r}; choose one of {', '.join(MODELS)}"),
      (cfg.model not in MODELS or cfg.dataset in _datasets(cfg.model),
       f"unknown dataset {cfg.dataset!r} for model {cfg.model}; choose one of "
       f"{', '.join(_datasets(cfg.model)) if cfg.model in MODELS else ''}"),
      (positive(cfg.epochs), f"epochs must be at least 1, got {cfg.epochs}"),
      (positive(cfg.batch_size), f"batch_size must be at least 1, got {cfg.batch_size}"),
      (cfg.lr is None or (np.isfinite(cfg.lr) and cfg.lr > 0),
       f"lr must be a positive number, got {cfg.lr}"),
      (cfg.lr is None or not cfg.lr > FLOAT32_MAX,  # trains in float32
       f"lr must be at most float32's largest number, {FLOAT32_MAX:.3g}, got {cfg.lr}"),
      (0 <= cfg.momentum < 1, f"momentum must be in [0, 1), got {cfg.momentum}"),
      (cfg.optimizer is None or cfg.optimizer in train.OPTIMIZERS,
       f"unknown optimizer {cfg.optimizer!r}; choose one of {', '.join(train.OPTIMIZERS)}"),
      (cfg.model in ("mlp", "regression") or cfg.hidden in ((), (256,)),
       "--hidden applies to the mlp and the regression net (the other models' layers are fixed)"),
      (all(h >= 1 for h in cfg.hidden) and (cfg.hidden or cfg.model not in ("mlp", "regression")),
       f"hidden must list positive widths, got {cfg.hidden}"),
      (cfg.precision in ops.PRECISIONS,
       f"unknown precision {cfg.precision!r}; choose one of {', '.join(ops.PRECISIONS)}"),
      (cfg.numpy_dtype in ("float32", "float64"),
       f"numpy_dtype must be float32 or float64, got {cfg.numpy_dtype!r}"),
      (cfg.impl != "numpy" or cfg.precision == "float32",
       "the numpy impl computes in --numpy_dtype; --precision applies to xla, pallas and "
       "triton only"),
      (cfg.impl != "triton" or cfg.model != "cnn",
       "--impl=triton covers the MLP family (mlp, logreg, regression), not the cnn"),
      (cfg.model != "cnn" or cfg.bias in (None, True), "the cnn always has biases"),
      (cfg.unroll >= 1, f"unroll must be at least 1, got {cfg.unroll}"),
      (cfg.dispatch in ("scan", "loop"), f"dispatch must be scan or loop, got {cfg.dispatch!r}"),
      (cfg.placement in ("resident", "streamed"),
       f"placement must be resident or streamed, got {cfg.placement!r}"),
      (cfg.sync in ("epoch", "step"), f"sync must be epoch or step, got {cfg.sync!r}"),
      (cfg.dispatch == "loop" or (cfg.placement == "resident" and cfg.sync == "epoch"),
       "streamed data and per-step metrics need --dispatch=loop (a scan runs on the device)"),
      (cfg.sync_every >= 1, f"sync_every must be at least 1, got {cfg.sync_every}"),
      (cfg.sync_every == 1 or cfg.sync == "epoch", "--sync_every needs --sync=epoch"),
      (cfg.epochs_per_call >= 0,
       f"epochs_per_call must be at least 0 (0: chosen by steps), got {cfg.epochs_per_call}"),
      (cfg.epochs_per_call <= 1 or cfg.dispatch == "scan",
       "--epochs_per_call needs --dispatch=scan (a loop dispatches each step)"),
      (cfg.epochs_per_call <= 1 or not cfg.data_parallel,
       "--data_parallel runs one epoch a call; give --epochs_per_call=1 or leave it out"),
      (cfg.impl != "numpy" or (cfg.dispatch, cfg.placement, cfg.sync, cfg.unroll, cfg.donate,
                               cfg.sync_every) == ("scan", "resident", "epoch", 1, True, 1),
       "the techniques apply to xla and pallas only"),
      (cfg.impl != "numpy" or cfg.epochs_per_call <= 1,
       "--epochs_per_call applies to xla, pallas and triton (numpy runs on the host)"),
      (cfg.blocks is None or cfg.impl == "pallas", "--blocks applies to --impl=pallas only"),
      (cfg.fusion in (None, "epoch", "step", "ops", "xla"),
       f"fusion must be epoch, step, ops or xla, got {cfg.fusion!r}"),
      (cfg.fusion is None or cfg.impl == "pallas", "--fusion applies to --impl=pallas only"),
      (cfg.fusion != "xla" or cfg.blocks is None,
       "--blocks sets the Pallas kernels' block sizes; --fusion=xla runs none"),
      (cfg.devices >= 0, f"devices must be at least 0 (0: all), got {cfg.devices}"),
      (not cfg.data_parallel or (cfg.impl in ("xla", "pallas") and cfg.dispatch == "scan"),
       "--data_parallel needs --impl=xla or pallas and --dispatch=scan"),
      (positive(cfg.train_limit), f"train_limit must be at least 1, got {cfg.train_limit}"),
      (positive(cfg.test_limit), f"test_limit must be at least 1, got {cfg.test_limit}"),
      (cfg.holdout >= 0, f"holdout must be at least 0, got {cfg.holdout}"),
  ]
  for ok, message in checks:
    if not ok:
      raise ConfigError(message)
  for field in dataclasses.fields(Config):
    applies = field.metadata["applies"]
    if field.name in cfg.given and applies and not applies[0](cfg):
      raise ConfigError(f"--{field.name} {applies[1]}")
  if cfg.impl == "triton":
    import triton_kernels
    if why := triton_kernels.unavailable():
      raise ConfigError(f"--impl=triton needs {why}")
  if why := compile_cache.problem(cfg.compilation_cache):
    raise ConfigError(why)
  if cfg.blocks is not None:
    try:
      ops.parse_blocks(cfg.blocks)
    except ValueError as e:
      raise ConfigError(str(e)) from None


def resolve(cfg: Config) -> Config:
  """Validate ``cfg`` and fill in the model's defaults (a resolved Config passes unchanged)."""
  validate(cfg)
  fill = {k: v for k, v in DEFAULTS[cfg.model].items() if getattr(cfg, k) is None}
  optimizer = fill.get("optimizer", cfg.optimizer)
  if cfg.lr is None:
    if (cfg.model, optimizer) not in LEARNING_RATES:
      raise ConfigError(f"no default learning rate for the {cfg.model} with --optimizer="
                        f"{optimizer}; give --lr")
    fill["lr"] = LEARNING_RATES[cfg.model, optimizer]
  if cfg.model in ("logreg", "cnn"):
    fill["hidden"] = ()  # Fixed architectures.
  return dataclasses.replace(cfg, **fill)

