"""Accuracy (or final MSE) over a grid of learning rates and seeds, trained as one population.

  python -m experiments.sweep --model=cnn --dataset=fashion --lrs=0.02,0.05,0.1 --seeds=0-4
  python -m experiments.sweep --seeds=0-15 --lrs=0.1,0.2,0.5 --devices=2 --out=sweep.json

Every (seed, lr) is one member of a population trained in one compiled program (xla; for pallas
the path ``jaxshallow.paths.population`` picks: on a Hopper GPU the reference MLP a cluster a
member or the streamed kernel, softmax regression a CTA a member, whose members of one seed
share its batches on one device; other MLPs on a GPU xla's ops), spread over the devices by
member; --population_chunk limits how many train at once.
--impl=numpy trains them one after another.

Classifiers are scored on a holdout of the last --holdout training images (trained on the rest),
not on the test set, so that a default chosen here is not fitted to the test set. A member whose
loss becomes NaN or infinite is shown as "diverged" and left out of its row's statistics; the
others go on, and the script exits non-zero at the end.
"""

import dataclasses
import sys

from absl import flags

from experiments import config_flags, distributed_flags
from jaxshallow.run import cli, config, population_run, runner

_LRS = flags.DEFINE_list("lrs", ["0.05", "0.1"], "Learning rates to try.")
_SEEDS = flags.DEFINE_string("seeds", "0,1,2", "Seeds to try each with: 0,1,2 or a range 0-15.")
_HOLDOUT = flags.DEFINE_integer("holdout", 10000, "Training images held out for scoring "
                                "classifiers (0: score on the test set).")
_CHUNK = flags.DEFINE_integer("population_chunk", 0, "Members trained at once (0: all).")
_OUT = flags.DEFINE_string("out", None, "Write the results as JSON to this file.")
_PLOT = flags.DEFINE_string("plot", None, "Draw score against learning rate to this PNG file.")


def parse_seeds(text: str) -> list[int]:
  seeds = []
  try:
    for part in (p.strip() for p in text.split(",") if p.strip()):
      lo, _, hi = part.partition("-")
      seeds += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
  except ValueError:
    raise config.ConfigError(f"seeds must be like 0,1,2 or 0-15, got {text!r}") from None
  if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
    raise config.ConfigError(f"seeds must be distinct non-negative integers, got {text!r}")
  return seeds


def parse_lrs(values) -> list[float]:
  try:
    lrs = [float(v) for v in values]
  except ValueError:
    raise config.ConfigError(f"lrs must be numbers, got {','.join(values)!r}") from None
  if not lrs or not all(0 < lr < float("inf") for lr in lrs):
    raise config.ConfigError(f"lrs must be positive numbers, got {','.join(values)!r}")
  if len(set(lrs)) != len(lrs):
    raise config.ConfigError(f"lrs must be distinct, got {','.join(values)!r}")
  return lrs


def sequential(cfg, seeds, lrs) -> dict:
  """The grid one run after another (the numpy impl)."""
  records = []
  for seed, lr in population_run.members(seeds, lrs):
    r = runner.run(config_flags.config_from_flags(lr=lr, seed=seed, holdout=cfg.holdout),
                   log=lambda s: None)
    rec = {k: r[k] for k in ("diverged", "diverged_epoch", "epoch_loss", "test_accuracy",
                             "test_loss", "final_mse", "test_mse") if k in r}
    records.append({"seed": seed, "lr": lr, **rec})
  return {**dataclasses.asdict(cfg), "hidden": list(cfg.hidden), **runner.device_info(cfg.impl),
          "members": records, "summary": population_run.summarize(records, lrs)}


def print_table(result, seeds, lrs, stat_name):
  by_key = {(r["seed"], r["lr"]): r for r in result["members"]}
  for row in result["summary"]:
    scores = [population_run.score(by_key[(s, row["lr"])]) for s in seeds]
    cells = "  ".join("diverged" if v is None else f"{v:.4f}" for v in scores)
    stats = (f"mean {row['mean']:.4f}  std {row['std']:.4f}  min {row['min']:.4f}  "
             f"max {row['max']:.4f}" if "mean" in row else "all diverged")
    print(f"lr {row['lr']:<8g} {cells}   {stats}", flush=True)
  print(f"({stat_name}; seeds {','.join(map(str, seeds))})")


def plot(result, path, stat_name):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  rows = [r for r in result["summary"] if "mean" in r]
  lr = [r["lr"] for r in rows]
  fig, ax = plt.subplots(figsize=(6, 4))
  ax.fill_between(lr, [r["min"] for r in rows], [r["max"] for r in rows], alpha=0.2,
                  label="min to max")
  ax.errorbar(lr, [r["mean"] for r in rows], yerr=[r["std"] for r in rows], marker="o",
              capsize=3, label="mean, std")
  ax.set_xscale("log")
  ax.set_xlabel("learning rate")
  ax.set_ylabel(stat_name)
  ax.set_title(f"{result['model']} {result.get('dataset', '')}, {result['impl']}, "
               f"{len(result['members']) // max(len(rows), 1)} seeds per lr")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)


def main(argv):
  del argv
  distributed_flags.initialize()
  seeds, lrs = parse_seeds(_SEEDS.value), parse_lrs(_LRS.value)
  cli.at_least("holdout", _HOLDOUT.value, 0)
  cli.at_least("population_chunk", _CHUNK.value, 0)
  # Each member's learning rate is one of --lrs (--lr is refused); its seed one of --seeds,
  # and --seed only draws the regression net's data set.
  cfg = config_flags.config_from_flags(lr=lrs[0])
  if "seed" in cfg.given and cfg.model != "regression":
    raise config.ConfigError("--seed draws the regression net's data set only; the members' "
                             "seeds are --seeds")
  holdout = 0 if cfg.model == "regression" else _HOLDOUT.value
  cfg = config.resolve(dataclasses.replace(cfg, holdout=holdout))
  cli.writable(_OUT.value)
  cli.plot_file(_PLOT.value, _OUT.value)
  try:
    stat_name = ("final MSE on the training set" if cfg.model == "regression" else
                 f"accuracy on a holdout of {holdout} training images" if holdout else
                 "accuracy on the test set")
    print(f"scored by: {stat_name}")
    if cfg.impl == "numpy":
      result = sequential(cfg, seeds, lrs)
    else:
      log = print if distributed_flags.is_main_process() else (lambda line: None)
      result = population_run.run(cfg, seeds, lrs, chunk=_CHUNK.value, log=log)
      log(f"{len(result['members'])} networks on {result['devices']} device(s) "
            f"({result['device']}): train {result['train_time_s']:.2f}s, "
            f"{result['networks_per_second']:.1f} networks/s, compile "
            f"{result['compile_time_s']:.1f}s")
  except ValueError as e:
    raise config.ConfigError(str(e)) from None
  if not distributed_flags.is_main_process():
    return  # Every process trained its members; the first reports.
  print_table(result, seeds, lrs, stat_name)
  if _OUT.value:
    runner.write_json({**result, "seeds": seeds, "lrs": lrs}, _OUT.value)
    print(f"wrote {_OUT.value}")
  if _PLOT.value:
    try:
      plot(result, _PLOT.value, stat_name)
      print(f"wrote {_PLOT.value}")
    except ImportError:
      print("plot skipped: matplotlib is not installed (pip install -e '.[plots]')",
            file=sys.stderr)
  diverged = sum(r["diverged"] for r in result["members"])
  if diverged:
    sys.exit(f"error: {diverged} run(s) diverged (marked above); try smaller --lrs")


if __name__ == "__main__":
  cli.run(main)
