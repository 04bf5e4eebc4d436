"""Train the shallow regression network on synthetic data: y = sum(x_i^2) + noise, x in [-1, 1]^32.

  python -m experiments.regression --impl=xla --size=large          # 32 -> 256 -> 1, 100 epochs
  python -m experiments.regression --hidden=256,1024,256            # a deeper variation

Defaults are the study's: no biases, MSE loss, SGD at lr 0.002, batch 256, 100 epochs. The data
set is drawn from --seed (small 256, medium 2,560, large 25,600 samples; 2,560 held out). The
JSON of --out has final_mse (the training set's, after training) and test_mse.
"""

from absl import flags

from experiments import config_flags
from jaxshallow.run import cli

_SIZE = flags.DEFINE_string("size", "large", "small | medium | large")
_BIAS = flags.DEFINE_bool("bias", False, "Give the layers biases (the study had none).")
_OUT = flags.DEFINE_string("out", None, "Write the results as JSON to this file.")


def main(argv):
  del argv
  config_flags.run_main(_OUT.value, model="regression", dataset=_SIZE.value, bias=_BIAS.value)


if __name__ == "__main__":
  cli.run(main)
