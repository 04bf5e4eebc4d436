"""Networks per second: populations of 1 to 512 MLPs on 1, 2, 4 ... devices, and data-parallel
training of one MLP at a large batch, against the single-network trainers, in one process.

  python -m benchmarks.population_bench --sizes=1,8,64,512 --device_counts=1,2,4 --out=pop.json

Every row is measured in this run: each configuration is compiled first (reported apart), then
trained for --epochs epochs, each blocked until its losses are on the host; the time per epoch
is the median. "networks/s" counts network-epochs per second: members / seconds per epoch.
"""

import dataclasses
import statistics

import jax
from absl import flags, logging

from experiments import config_flags
from jaxshallow.run import cli, config, population_run, runner

_SIZES = flags.DEFINE_list("sizes", ["1", "8", "64", "512"], "Population sizes.")
_IMPLS = flags.DEFINE_list("impls", ["xla", "pallas"], "Impls: xla, pallas (its default path, "
                           "jaxshallow.paths.population's pick), pallas-cluster (--fusion=epoch: "
                           "a cluster a member, or the streamed kernel where the path takes "
                           "it; Hopper, the reference MLP; each row says which), pallas-step (the "
                           "population step kernels at every size), pallas-ops (the op kernels "
                           "under vmap).")
_COUNTS = flags.DEFINE_list("device_counts", ["1"], "Device counts to spread over (those over "
                            "the available devices are skipped, with a note).")
_DP_BATCH = flags.DEFINE_integer("dp_batch", 8192, "Batch of the data-parallel rows (0: none).")
_OUT = flags.DEFINE_string("out", None, "Write the rows as JSON to this file.")
_PLOT = flags.DEFINE_string("plot", None, "Draw networks/s against population size here (PNG).")


def population_rows(base, sizes, counts, log):
  rows = []
  for name in _IMPLS.value:
    impl, fusion = {"pallas-ops": ("pallas", "ops"), "pallas-step": ("pallas", "step"),
                    "pallas-cluster": ("pallas", "epoch")}.get(name, (name, None))
    single = runner.run(dataclasses.replace(base, impl=impl, fusion=None), log=lambda s: None)
    single_s = statistics.median(single["epoch_time_s"])
    rows.append(dict(kind="single", impl=impl, fusion=single.get("fusion"), devices=1,
                     members=1, epoch_s=single_s, compile_s=single["compile_time_s"],
                     networks_per_s=1 / single_s, mean_accuracy=single["test_accuracy"]))
    log(rows[-1])
    for d in counts:
      for n in sizes:
        cfg = dataclasses.replace(base, impl=impl, devices=d, fusion=fusion)
        r = population_run.run(cfg, list(range(n)), [base.lr], log=lambda s: None)
        epoch_s = statistics.median(r["epoch_time_s"])
        acc = [m["test_accuracy"] for m in r["members"] if not m["diverged"]]
        rows.append(dict(kind="population", impl=impl, fusion=r.get("fusion"), devices=d,
                         members=n, epoch_s=epoch_s, compile_s=r["compile_time_s"],
                         networks_per_s=n / epoch_s, vs_single=epoch_s / single_s,
                         mean_accuracy=sum(acc) / max(len(acc), 1)))
        log(rows[-1])
  return rows


def data_parallel_rows(base, counts, log):
  rows = []
  for d in counts:
    cfg = dataclasses.replace(base, impl="xla", batch_size=_DP_BATCH.value, lr=None,
                              data_parallel=d > 1, devices=d if d > 1 else 0)
    r = runner.run(cfg, log=lambda s: None)
    epoch_s = statistics.median(r["epoch_time_s"])
    rows.append(dict(kind="data_parallel", impl="xla", devices=d, members=1,
                     batch_size=cfg.batch_size, epoch_s=epoch_s, compile_s=r["compile_time_s"],
                     networks_per_s=1 / epoch_s, mean_accuracy=r["test_accuracy"]))
    log(rows[-1])
  return rows


def _show(row):
  extra = f"  {row['vs_single']:.2f}x single" if "vs_single" in row else ""
  print(f"{row['kind']:<13} {row['impl']:<6} {str(row.get('fusion') or ''):<5} "
        f"devices {row['devices']}  members {row['members']:>4}  "
        f"epoch {1000 * row['epoch_s']:9.1f} ms  {row['networks_per_s']:8.1f} networks/s  "
        f"compile {row['compile_s']:.1f}s  acc {100 * row['mean_accuracy']:.2f}%{extra}",
        flush=True)


def plot(rows, path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(6, 4))
  key = lambda r: (r["impl"], r.get("fusion") or "", r["devices"])
  for impl, fusion, d in sorted({key(r) for r in rows if r["kind"] == "population"}):
    pts = sorted((r["members"], r["networks_per_s"]) for r in rows
                 if r["kind"] == "population" and key(r) == (impl, fusion, d))
    name = f"{impl} ({fusion})" if fusion else impl
    ax.plot(*zip(*pts), marker="o", label=f"{name}, {d} device(s)")
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("population size (networks trained at once)")
  ax.set_ylabel("network-epochs per second")
  ax.set_title(f"networks trained at once: {jax.devices()[0].device_kind}")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)


IMPLS = ("xla", "pallas", "pallas-cluster", "pallas-step", "pallas-ops")


def main(argv):
  del argv
  logging.set_verbosity(logging.ERROR)
  sizes = cli.ints("sizes", _SIZES.value)
  counts = cli.ints("device_counts", _COUNTS.value)
  cli.known("--impls", _IMPLS.value, IMPLS)
  cli.at_least("dp_batch", _DP_BATCH.value, 0)
  base = config.resolve(config_flags.config_from_flags())
  if base.model not in ("mlp", "logreg", "cnn"):
    raise config.ConfigError("the population bench measures the mlp, logreg and cnn models")
  cli.writable(_OUT.value)
  cli.plot_file(_PLOT.value, _OUT.value)
  try:
    available = len(jax.devices())
    skipped = [c for c in counts if c > available]
    counts = [c for c in counts if c <= available]
    notes = [f"device counts {skipped} skipped: {available} device(s) here"] if skipped else []
    rows = population_rows(base, sizes, counts, _show)
    if _DP_BATCH.value:
      rows += data_parallel_rows(base, counts, _show)
  except ValueError as e:
    raise config.ConfigError(str(e)) from None
  result = {**runner.device_info("xla"), "device_count": available, "notes": notes,
            "epochs": base.epochs, "rows": rows}
  for n in notes:
    print("note:", n)
  if _OUT.value:
    runner.write_json(result, _OUT.value)
    print(f"wrote {_OUT.value}")
  if _PLOT.value:
    plot(rows, _PLOT.value)
    print(f"wrote {_PLOT.value}")


if __name__ == "__main__":
  cli.run(main)
