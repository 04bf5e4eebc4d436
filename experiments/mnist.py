"""Train a network on MNIST or Fashion-MNIST with one implementation and report how it went.

  python -m experiments.mnist --impl=xla --epochs=10 --out=results.json
"""

import sys

from absl import app, flags, logging

from experiments import config_flags
from jaxshallow import data, runner

_OUT = flags.DEFINE_string("out", None, "Write the results as JSON to this file.")


def main(argv):
  logging.set_verbosity(logging.WARNING)  # Hide JAX's backend-probing INFO lines.
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments {' '.join(argv[1:])}")
  try:
    cfg = config_flags.config_from_flags()
    if _OUT.value:
      runner.check_writable(_OUT.value)
    result = runner.run(cfg)
  except (runner.ConfigError, data.DataError) as e:
    sys.exit(f"error: {e}")
  if _OUT.value:
    runner.write_json(result, _OUT.value)
    print(f"wrote {_OUT.value}")


if __name__ == "__main__":
  app.run(main)
