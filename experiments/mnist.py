"""Train a network on MNIST or Fashion-MNIST with one implementation and report how it went.

  python -m experiments.mnist --impl=xla --epochs=10 --out=results.json
"""

from absl import flags

from experiments import config_flags
from jaxshallow.run import cli

_OUT = flags.DEFINE_string("out", None, "Write the results as JSON to this file.")


def main(argv):
  del argv
  config_flags.run_main(_OUT.value)


if __name__ == "__main__":
  cli.run(main)
