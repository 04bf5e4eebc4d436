"""The absl flags of one training configuration, shared by the experiment scripts: one flag a
``Config`` setting (``jaxshallow.run.config``), made from its type, default and help."""

import dataclasses
import sys

from absl import flags, logging

from jaxshallow import data
from jaxshallow.run import config, runner

_DEFINE = {"str": flags.DEFINE_string, "int": flags.DEFINE_integer,
           "float": flags.DEFINE_float, "bool": flags.DEFINE_bool}


def _define(field: dataclasses.Field):
  """The absl flag of one setting: a string for tuples of widths, else by the field's type."""
  kind = field.type.split("|")[0].strip()
  if kind.startswith("tuple"):
    default = ",".join(map(str, field.default))
    return flags.DEFINE_string(field.name, default, config.help_text(field))
  return _DEFINE[kind](field.name, field.default, config.help_text(field))


FLAGS = {f.name: _define(f) for f in dataclasses.fields(config.Config) if f.metadata["flag"]}


def parse_widths(text: str) -> tuple[int, ...]:
  try:
    return tuple(int(w) for w in text.split(",") if w.strip())
  except ValueError:
    raise config.ConfigError(f"hidden must be comma-separated integers, got {text!r}") from None


def config_from_flags(**overrides) -> config.Config:
  """The Config the flags describe, ``overrides`` replacing single fields; ``runner.run``
  validates it and fills in the model's defaults (``config.resolve``)."""
  values = {name: flag.value for name, flag in FLAGS.items()}
  values["hidden"] = parse_widths(values["hidden"])
  return dataclasses.replace(config.Config(**values), **overrides)


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
    result = runner.run(config_from_flags(**overrides), out=out)
  except (config.ConfigError, data.DataError) as e:
    sys.exit(f"error: {e}")
  if result["diverged"]:
    sys.exit(f"error: {runner.divergence_message(result)}")
