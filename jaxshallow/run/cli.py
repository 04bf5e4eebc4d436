"""What every script shares on its command line: a user's mistake ends the program with one
line and a non-zero exit, never a traceback, and nothing is written.

``cli.run(main)`` in place of ``app.run(main)``: stray positional arguments are refused, and a
``ConfigError`` or ``DataError`` raised by ``main`` (or by what it calls) becomes ``error: ...``.
The checks below name the flag and what it must be; a script runs them all before it prints,
loads or compiles anything.
"""

from __future__ import annotations

import pathlib
import sys

from absl import app, logging

from jaxshallow import data
from jaxshallow.run import runner
from jaxshallow.run.config import ConfigError


def run(main) -> None:
  def checked(argv):
    logging.set_verbosity(logging.WARNING)  # Hide JAX's backend-probing INFO lines.
    try:
      if len(argv) > 1:
        raise ConfigError(f"unexpected arguments {' '.join(argv[1:])}")
      return main(argv)
    except (ConfigError, data.DataError) as e:
      sys.exit(f"error: {e}")
    except Exception as e:  # noqa: BLE001 -- one kind only, re-raised otherwise
      if "RESOURCE_EXHAUSTED" not in str(e):
        raise
      # A network or batch too large for the device: what was asked for, in one line.
      import jax
      sys.exit(f"error: out of memory on {jax.devices()[0].device_kind}: "
               f"{str(e).strip().splitlines()[0][:200]} (a smaller network, batch or population "
               "fits)")
  app.run(checked)


def at_least(flag: str, value, low) -> None:
  if value is None or value < low:
    raise ConfigError(f"{flag} must be at least {low}, got {value}")


def positive(flag: str, value) -> None:
  if not value > 0:
    raise ConfigError(f"{flag} must be positive, got {value}")


def ints(flag: str, values, low: int = 1) -> list[int]:
  """A list flag of integers, each at least ``low``."""
  try:
    out = [int(v) for v in values]
  except ValueError:
    out = None
  if not out or min(out) < low:
    kind = "positive integers" if low == 1 else f"integers of at least {low}"
    raise ConfigError(f"{flag} must be {kind}, got {','.join(values)!r}")
  return out


def known(flag: str, values, choices, empty: bool = False) -> None:
  """Every value of a list flag among ``choices``; at least one unless ``empty``."""
  if not values and not empty:
    raise ConfigError(f"{flag} names none; choose from {', '.join(choices)}")
  if unknown := [v for v in values if v not in choices]:
    raise ConfigError(f"unknown {flag} {', '.join(unknown)}; choose from {', '.join(choices)}")


def writable(path, flag: str = "--out") -> None:
  """Fail before training, not after it, where ``path`` cannot be written."""
  if path:
    runner.check_writable(path, flag)


PLOT_FORMATS = (".png", ".pdf", ".svg")


def plot_file(path, out=None, flag: str = "--plot") -> None:
  """Fail before training where a plot cannot be drawn to ``path``: a format matplotlib writes,
  named by the suffix; not the results file ``out``; writable."""
  if not path:
    return
  if pathlib.Path(path).suffix.lower() not in PLOT_FORMATS:
    raise ConfigError(f"{flag} {path}: name a {', '.join(PLOT_FORMATS)} file")
  if out and pathlib.Path(out).resolve() == pathlib.Path(path).resolve():
    raise ConfigError(f"{flag} and --out name the same file, {path}")
  writable(path, flag)
