"""The absl flags of one training configuration, shared by the experiment scripts: one flag a
``Config`` setting (``jaxshallow.run.config``), made from its type, default and help."""

import dataclasses
import sys

from absl import flags

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
    return tuple(int(w) for w in text.split(","))
  except ValueError:
    raise config.ConfigError(f"hidden must be comma-separated integers, got {text!r}") from None


def config_from_flags(**overrides) -> config.Config:
  """The Config the flags describe, ``overrides`` (the script's own settings) replacing single
  fields; ``runner.run`` validates it and fills in the model's defaults (``config.resolve``),
  and refuses the flags given that do not apply to it (``Config.given``)."""
  script = getattr(sys.modules["__main__"].__spec__, "name", "this script")
  if given_twice := [n for n in overrides if n in FLAGS and FLAGS[n].present]:
    raise config.ConfigError(f"--{given_twice[0]} does not apply to {script}: it sets the "
                             f"{given_twice[0]} itself")
  values = {name: flag.value for name, flag in FLAGS.items()}
  values["hidden"] = parse_widths(values["hidden"])
  given = tuple(name for name, flag in FLAGS.items() if flag.present)
  return dataclasses.replace(config.Config(**values, given=given), **overrides)


def run_main(out: str | None, **overrides) -> None:
  """The body of a training script's ``main`` (run by ``cli.run``): train the flags' config,
  print its progress, write ``out`` as JSON."""
  result = runner.run(config_from_flags(**overrides), out=out)
  if result["diverged"]:
    sys.exit(f"error: {runner.divergence_message(result)}")
