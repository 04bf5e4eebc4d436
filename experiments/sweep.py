"""Accuracy (or final MSE) over a grid of learning rates and seeds, for choosing defaults.

  python -m experiments.sweep --model=cnn --dataset=fashion --lrs=0.02,0.05,0.1 --seeds=0,1,2

Classifiers are scored on a holdout of the last --holdout training images (trained on the rest),
not on the test set, so that a default chosen here is not fitted to the test set. A run whose loss
becomes NaN or infinite is shown as "diverged" and left out of its row's min and mean; the others
go on, and the script exits non-zero at the end.
"""

import sys

import numpy as np
from absl import app, flags, logging

from experiments import config_flags
from jaxshallow import config, data, runner

_LRS = flags.DEFINE_list("lrs", ["0.05", "0.1"], "Learning rates to try.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds to try each with.")
_HOLDOUT = flags.DEFINE_integer("holdout", 10000, "Training images held out for scoring "
                                "classifiers (0: score on the test set).")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  try:
    cfg = config_flags.config_from_flags()
    holdout = 0 if cfg.model == "regression" else _HOLDOUT.value
    print("scored by: " + ("final MSE on the training set" if cfg.model == "regression" else
                           f"accuracy on a holdout of {holdout} training images" if holdout else
                           "accuracy on the test set"))
    diverged = 0
    for lr in map(float, _LRS.value):
      scores = []
      for seed in map(int, _SEEDS.value):
        r = runner.run(config_flags.config_from_flags(lr=lr, seed=seed, holdout=holdout),
                       log=lambda s: None)
        if r["diverged"]:
          diverged += 1
          print(f"lr {lr:g} seed {seed}: {runner.divergence_message(r)}", file=sys.stderr)
        scores.append(None if r["diverged"] else r.get("test_accuracy", r.get("final_mse")))
      ok = [s for s in scores if s is not None]
      summary = f"min {min(ok):.4f}  mean {np.mean(ok):.4f}" if ok else "all diverged"
      print(f"lr {lr:<8g} " + "  ".join("diverged" if s is None else f"{s:.4f}" for s in scores)
            + f"   {summary}", flush=True)
  except (config.ConfigError, data.DataError, ValueError) as e:
    sys.exit(f"error: {e}")
  if diverged:
    sys.exit(f"error: {diverged} run(s) diverged (marked above)")


if __name__ == "__main__":
  app.run(main)
