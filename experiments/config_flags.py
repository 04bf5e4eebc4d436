"""The absl flags that describe one training configuration, shared by the experiment scripts."""

import dataclasses
import sys

from absl import flags, logging

from jaxshallow.run import config, runner
from jaxshallow import data

_IMPL = flags.DEFINE_string("impl", "xla", "xla | pallas | triton (GPU, jax-triton) | numpy")
_MODEL = flags.DEFINE_string("model", "mlp", "mlp | logreg | cnn")
_DATASET = flags.DEFINE_string("dataset", "mnist", "mnist | fashion")
_EPOCHS = flags.DEFINE_integer("epochs", None, "Passes over the training set; default: the "
                               "model's (mlp, logreg 10; cnn 5).")
_BATCH = flags.DEFINE_integer("batch_size", None, "Examples per step; default: the model's (64).")
_LR = flags.DEFINE_float("lr", None, "Learning rate; default: the model's for the optimizer "
                         "(README).")
_OPTIMIZER = flags.DEFINE_string("optimizer", None, "sgd | momentum | adam; default: the "
                                 "model's (cnn momentum, the others sgd).")
_MOMENTUM = flags.DEFINE_float("momentum", 0.9, "Momentum, for --optimizer=momentum.")
_HIDDEN = flags.DEFINE_string("hidden", "256", "Hidden widths, comma separated: 512,256 is two "
                               "(mlp and regression).")
_SEED = flags.DEFINE_integer("seed", 0, "Seeds the initial weights and the batch order.")
_PRECISION = flags.DEFINE_string("precision", "float32", "float32 | tf32 | bfloat16 (xla, pallas).")
_NUMPY_DTYPE = flags.DEFINE_string("numpy_dtype", "float32", "float32 | float64 (numpy impl).")
_DATA_DIR = flags.DEFINE_string("data_dir", None, f"Folder with the data; else ${data.ENV_VAR}, "
                                "then the user cache, then a download.")
_TRAIN_LIMIT = flags.DEFINE_integer("train_limit", None, "Use only the first N training images.")
_TEST_LIMIT = flags.DEFINE_integer("test_limit", None, "Use only the first N test images.")
_DISPATCH = flags.DEFINE_string("dispatch", "scan", "scan: each epoch is one compiled loop; "
                                 "loop: a Python loop over a jitted step.")
_UNROLL = flags.DEFINE_integer("unroll", 1, "Steps unrolled per iteration of the epoch loop.")
_PLACEMENT = flags.DEFINE_string("placement", "resident", "resident: data on the device; "
                                  "streamed: batches copied from the host, the next one "
                                  "prefetched (needs --dispatch=loop).")
_DONATE = flags.DEFINE_bool("donate", True, "Donate params and optimizer state to each update.")
_SYNC = flags.DEFINE_string("sync", "epoch", "epoch: fetch the loss once an epoch; step: after "
                            "every step (needs --dispatch=loop).")
_SYNC_EVERY = flags.DEFINE_integer("sync_every", 1, "With --sync=epoch: bring the losses to "
                                   "the host every N epochs only.")
_OVERLAP = flags.DEFINE_bool("overlap", True, "Dispatch the next two epochs before waiting for "
                             "this one's loss (the host two epochs behind the device); "
                             "--nooverlap: wait, then dispatch.")
_BLOCKS = flags.DEFINE_string("blocks", None, "Pallas dense block sizes BM,BN,BK, or auto.")
_FUSION = flags.DEFINE_string("fusion", None, "pallas: epoch (the whole epoch in one kernel; the "
                              "default for the MLP family; in a population, the population "
                              "step kernels), step (the cnn's default: a step of Pallas kernels "
                              "alone, the optimizer in one of them) or ops (one step per scan "
                              "iteration through the op kernels and optax).")
_DATA_PARALLEL = flags.DEFINE_bool("data_parallel", False, "Split each step's batch over the "
                                   "devices, gradients all-reduced (xla, pallas op kernels).")
_DEVICES = flags.DEFINE_integer("devices", 0, "Devices to use (0: all): for --data_parallel, "
                                "and for the population of experiments.sweep.")


def parse_widths(text: str) -> tuple[int, ...]:
  try:
    return tuple(int(w) for w in text.split(",") if w.strip())
  except ValueError:
    raise config.ConfigError(f"hidden must be comma-separated integers, got {text!r}") from None


def config_from_flags(**overrides) -> config.Config:
  """The Config the flags describe, validated; ``overrides`` replace single fields."""
  cfg = config.Config(
      impl=_IMPL.value, model=_MODEL.value, dataset=_DATASET.value, epochs=_EPOCHS.value,
      batch_size=_BATCH.value, lr=_LR.value, optimizer=_OPTIMIZER.value,
      momentum=_MOMENTUM.value, hidden=parse_widths(_HIDDEN.value), seed=_SEED.value,
      precision=_PRECISION.value, numpy_dtype=_NUMPY_DTYPE.value, data_dir=_DATA_DIR.value,
      train_limit=_TRAIN_LIMIT.value, test_limit=_TEST_LIMIT.value, dispatch=_DISPATCH.value,
      unroll=_UNROLL.value, placement=_PLACEMENT.value, donate=_DONATE.value, sync=_SYNC.value,
      sync_every=_SYNC_EVERY.value, overlap=_OVERLAP.value, blocks=_BLOCKS.value,
      fusion=_FUSION.value, data_parallel=_DATA_PARALLEL.value, devices=_DEVICES.value)
  return config.resolve(dataclasses.replace(cfg, **overrides))


def check_no_arguments(argv) -> None:
  """absl leaves what is not a flag in ``argv``: the scripts take none, so say so in one line."""
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments {' '.join(argv[1:])}")


def run_main(argv, out: str | None, **overrides) -> None:
  """The body of a training script's ``main``: train the flags' config, print its progress,
  write ``out`` as JSON. Bad settings and missing data end the program with one line."""
  logging.set_verbosity(logging.WARNING)  # Hide JAX's backend-probing INFO lines.
  check_no_arguments(argv)
  try:
    cfg = config_from_flags(**overrides)
    if out:
      runner.check_writable(out)
    result = runner.run(cfg)
  except (config.ConfigError, data.DataError) as e:
    sys.exit(f"error: {e}")
  if out:
    runner.write_json(result, out)
    print(f"wrote {out}")
  if result["diverged"]:
    sys.exit(f"error: {runner.divergence_message(result)}")
