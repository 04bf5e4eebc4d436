"""Every workload x implementation x technique, side by side in one process.

  python -m benchmarks.bench                       # the whole suite; writes docs/RESULTS.md
  python -m benchmarks.bench --quick --out_dir=/tmp/bench   # a tiny run (the CPU test)
  python -m benchmarks.bench --grid                # the breadth grid: writes docs/GRID.md

``--grid`` trains every point of ``benchmarks.grid`` (or those of ``--points``) with xla and
pallas in this one process, and writes GRID.md, grid.json and grid.png: train and compile time
of each, the path pallas took, and the accuracy (or final MSE) as a mean over ``--seeds``.

Each configuration is compiled ahead of time (reported as compile time), warmed up for an epoch,
reset to the same initial weights, then trained ``repeats`` times, and more while the runs so
far add up to less than ``MIN_TIMED_S`` (where more than one was asked for: a training of a
few milliseconds varies by tens of percent from run to run); the table shows the median run,
timed on the host from each epoch's loss on the host to the next's, with the next two
epochs dispatched before the host waits (``--overlap``, the default; the technique rows "host
waits for each epoch" do not). Speedups compare samples per second with the NumPy CPU baseline and
with the PyTorch CUDA-graph peer of the same workload, batch size and precision. Slow
configurations run fewer epochs, or fewer examples: the table says how many, and rates (steps/s,
samples/s) are what compare. The MLP's batch-size rows run at each of ``--batch_precisions``
(variant "batch 1024, tf32").
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

import numpy as np
from absl import flags

from benchmarks import end_to_end, grid, quick, torch_peer
from experiments import guard_flags
from jaxshallow import compile_cache, files, ops, paths
from jaxshallow.run import cli, config, runner, trainers

_WORKLOADS = flags.DEFINE_list("workloads", ["mlp", "cnn", "logreg", "regression"],
                               "Workloads: mlp, cnn, logreg, regression.")
_IMPLS = flags.DEFINE_list("impls", ["numpy", "xla", "pallas", "triton", "torch"],
                           "Implementations; triton runs the MLP family only (GPU, jax-triton); "
                           "torch runs the PyTorch peers of --torch_modes.")
_TORCH_MODES = flags.DEFINE_list(
    "torch_modes", list(torch_peer.MODES),
    f"The PyTorch peers' modes ({', '.join(torch_peer.MODES)}): eager, a CUDA graph of the "
    "step, torch.compile (default mode and max-autotune).")
_TECHNIQUES = flags.DEFINE_bool("techniques", True, "Measure the technique switches on the MLP.")
_TECHNIQUE_NAMES = flags.DEFINE_list(
    "technique_names", [], "Only these technique switches (e.g. tf32,bfloat16); all if empty.")
_BATCH_SIZES = flags.DEFINE_list("batch_sizes", ["256", "1024", "8192"],
                                 "Further MLP batch sizes (64 is the reference).")
_CNN_PRECISIONS = flags.DEFINE_list(
    "cnn_precisions", ["tf32", "bfloat16"],
    "Further precisions of the CNN's rows, peers alike (float32 is the reference; none: skip).")
_BATCH_PRECISIONS = flags.DEFINE_list(
    "batch_precisions", ["float32", "tf32", "bfloat16"],
    "Precisions of the MLP batch-size rows (batch 64 has its own in the techniques).")
_BLOCK_SWEEP = flags.DEFINE_list("block_sweep", ["16,16,16", "16,16,64", "16,16,128",
                                                 "32,32,32", "64,64,32", "128,128,32", "auto"],
                                 "Pallas dense block sizes to time on the MLP (BM,BN,BK or auto).")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs per fast configuration, at least "
                                 "(median; more for trainings under MIN_TIMED_S).")
_NUMPY_EPOCHS = flags.DEFINE_integer("numpy_epochs", 1, "Epochs of the NumPy baseline (slow).")
_NUMPY_CNN_LIMIT = flags.DEFINE_integer("numpy_cnn_train_limit", 6400,
                                        "Training images of the NumPy CNN baseline.")
_QUICK = flags.DEFINE_bool("quick", False, "Tiny configurations: a structural check on a CPU.")
_OUT_DIR = flags.DEFINE_string("out_dir", "docs", "Where RESULTS.md, JSON, CSV and plots go (with "
                                "--quick: a folder in the system's temp folder unless given).")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Folder with the MNIST files.")
_PLOTS = flags.DEFINE_bool("plots", True, "Draw PNG plots (needs matplotlib, the plots extra).")
_END_TO_END = flags.DEFINE_bool("end_to_end", False, "Also time fresh processes of the training "
                                "script, cold and warm, for the workloads' xla and pallas "
                                "reference rows (benchmarks.end_to_end).")
_GRID = flags.DEFINE_bool("grid", False, "Run the breadth grid (benchmarks.grid) instead.")
_POINTS = flags.DEFINE_list("points", [], "With --grid: only these points (all if empty).")
_SEEDS = flags.DEFINE_list("seeds", ["0"], "With --grid: the accuracy is the mean over these "
                           "seeds (timing from the first).")
_ALTERNATIVES = flags.DEFINE_bool("alternatives", False, "With --grid: also time every other "
                                  "Pallas path that can train each point.")
_JOBS = flags.DEFINE_integer("jobs", 1, "With --grid --quick: deal the points to this many "
                             "processes at once (a quick run's times mean nothing) and write one "
                             "GRID.md from all.")
_MERGE = flags.DEFINE_list("merge", [], "With --grid: train nothing; write one GRID.md from these "
                           "grid.json files (runs of a few points each, one process a point).")

BASE = {  # The reference configuration of each workload (WORKLOADS.md).
    "mlp": config.Config(model="mlp"),
    "cnn": config.Config(model="cnn"),
    "logreg": config.Config(model="logreg"),
    "regression": config.Config(model="regression", dataset="large"),
}
QUICK = {
    "mlp": dict(train_limit=640, test_limit=200, epochs=2, hidden=(32,)),
    "cnn": dict(train_limit=128, test_limit=100, epochs=1),
    "logreg": dict(train_limit=640, test_limit=200, epochs=2),
    "regression": dict(dataset="small", epochs=2, hidden=(32,)),
}
TECHNIQUES = [  # (variant name, Config overrides, whether it is slow)
    ("loop dispatch", dict(dispatch="loop"), True),
    ("loop + loss synced every step", dict(dispatch="loop", sync="step"), True),
    ("loss synced every 5 epochs", dict(sync_every=5), False),
    ("host waits for each epoch", dict(overlap=False), False),
    ("streamed from host, prefetched", dict(dispatch="loop", placement="streamed"), True),
    ("no donation", dict(donate=False), False),
    ("scan unrolled x4", dict(unroll=4), False),
    ("tf32", dict(precision="tf32"), False),
    ("bfloat16", dict(precision="bfloat16"), False),
]
COLUMNS = ["group", "workload", "impl", "variant", "fusion", "optimizer", "lr", "batch_size",
           "epochs", "n_train", "repeats", "train_time_s", "epoch_time_s", "steps_per_s",
           "samples_per_s", "compile_time_s", "device_memory_mb", "diverged", "test_accuracy",
           "final_mse", "x_numpy", "x_torch_graph"]


@dataclasses.dataclass
class Case:
  group: str  # workloads | techniques | batch | blocks
  workload: str
  impl: str  # numpy | xla | pallas | torch-eager | torch-graph | torch-compile | ...
  variant: str
  cfg: config.Config
  repeats: int


def build_cases(impls: list[str]) -> list[Case]:
  quick = _QUICK.value
  repeats = 1 if quick else _REPEATS.value

  def cfg(workload, impl, **over):
    c = dataclasses.replace(BASE[workload], data_dir=_DATA_DIR.value,
                            **(QUICK[workload] if quick else {}))
    if impl == "numpy" and not quick:
      over.setdefault("epochs", min(_NUMPY_EPOCHS.value, 100) if workload != "regression"
                      else None)
      if workload == "cnn":
        over.setdefault("train_limit", _NUMPY_CNN_LIMIT.value)
    # The torch peer reads only the model settings; "xla" stands in for the impl field.
    return paths.resolve(config.resolve(
        dataclasses.replace(c, impl="xla" if "torch" in impl else impl, **over)))

  peers = [f"torch-{m}" for m in _TORCH_MODES.value] if "torch" in impls else []
  fast_peers = [p for p in peers if p != "torch-eager"]
  cases = []
  for w in _WORKLOADS.value:
    jax_impls_w = [i for i in impls if i != "torch" and (i != "triton" or w != "cnn")]
    for impl in jax_impls_w + (peers if w != "regression" else []):
      slow = impl in ("numpy", "torch-eager")
      cases.append(Case("workloads", w, impl, "reference", cfg(w, impl), 1 if slow else repeats))
      if impl == "pallas" and cases[-1].cfg.fusion in ("epoch", "step"):  # Op kernels, optax.
        cases.append(Case("workloads", w, impl, "op kernels (--fusion=ops)",
                          cfg(w, impl, fusion="ops"), repeats))
    if w == "cnn" and not quick:  # The CNN at the tensor-core precisions, peers alike.
      for precision in _CNN_PRECISIONS.value:
        for impl in [i for i in impls if i in ("xla", "pallas")] + fast_peers:
          cases.append(Case("workloads", w, impl, precision, cfg(w, impl, precision=precision),
                            repeats))
  if "mlp" in _WORKLOADS.value:
    jax_impls = [i for i in ("xla", "pallas", "triton") if i in impls]
    if _TECHNIQUES.value:
      for impl in [i for i in jax_impls if i != "triton"]:  # the techniques: xla and pallas
        for name, over, slow in TECHNIQUES:
          if _TECHNIQUE_NAMES.value and name not in _TECHNIQUE_NAMES.value:
            continue
          cases.append(Case("techniques", "mlp", impl, name, cfg("mlp", impl, **over),
                            1 if slow else repeats))
    sizes = [int(b) for b in _BATCH_SIZES.value] if not quick else [128]
    precisions = _BATCH_PRECISIONS.value if not quick else ["float32"]
    for precision in precisions:
      name = "" if precision == "float32" else f", {precision}"
      for bs in sizes:
        for impl in jax_impls + fast_peers:
          cases.append(Case("batch", "mlp", impl, f"batch {bs}{name}",
                            cfg("mlp", impl, batch_size=bs, precision=precision), repeats))
    if "pallas" in impls:
      for blocks in (_BLOCK_SWEEP.value if not quick else ["16,16,16", "auto"]):
        cases.append(Case("blocks", "mlp", "pallas", f"blocks {blocks}",
                          cfg("mlp", "pallas", blocks=blocks), repeats))
  return cases


def grid_cases() -> list[Case]:
  """xla and pallas at every point of the grid (or of ``--points``)."""
  quick = _QUICK.value
  cases = []
  repeats = 1 if quick else _REPEATS.value
  for point in grid.points(_POINTS.value):
    cfgs = {impl: paths.resolve(grid.config_of(point, impl, quick, data_dir=_DATA_DIR.value,
                                               seed=int(_SEEDS.value[0])))
            for impl in ("xla", "pallas")}
    cases += [Case("grid", cfg.model, impl, point.name, cfg, repeats)
              for impl, cfg in cfgs.items()]
    pallas = cfgs["pallas"]
    if _ALTERNATIVES.value:
      for fusion in ("ops", "epoch", "step"):
        if fusion != pallas.fusion and paths.problem(pallas, fusion) is None:
          alt = dataclasses.replace(pallas, fusion=fusion)
          cases.append(Case("grid-alt", pallas.model, "pallas", point.name, alt, repeats))
  return cases


_DATA: dict = {}


def dataset(cfg: config.Config):
  key = (cfg.model, cfg.dataset, cfg.train_limit, cfg.test_limit, cfg.seed)
  if key not in _DATA:
    _DATA[key] = runner.load_data(cfg)
  return _DATA[key]


def score(trainer, cfg: config.Config):
  """The test accuracy (final training MSE for the regression net) of a trained network."""
  if cfg.model == "regression":
    return trainer.evaluate("train")["loss"]
  return trainer.evaluate("test")["accuracy"]


def seed_scores(case: Case, compiled, seeds) -> list:
  """The score of ``case``'s network trained from each of ``seeds`` (its initial weights and
  batch order), with the function ``compiled`` for the first seed; None where it diverged."""
  import jax
  scores = []
  for seed in seeds:
    cfg = dataclasses.replace(case.cfg, seed=seed)
    ds = dataset(cfg)
    trainer = make_trainer(dataclasses.replace(case, cfg=cfg), ds,
                           jax.tree.map(np.asarray, trainers.init_params(cfg, ds)))
    trainer.fn = compiled  # The same shapes: no second compile.
    _, losses = runner.timed_epochs(trainer, cfg.epochs)
    scores.append(score(trainer, cfg) if np.all(np.isfinite(losses)) else None)
  return scores


def make_trainer(case: Case, ds, params):
  if case.impl.startswith("torch"):
    return torch_peer.TorchTrainer(case.cfg, ds, params, mode=case.impl.split("-", 1)[1])
  return trainers.make_trainer(case.cfg, ds, params)


# Short trainings repeat until their runs add up to this much (at most MAX_REPEATS runs): the
# regression net's small set (about 1-2 ms a training) gave 1.77x from a median of 3 runs and
# 2.11x from a median of 30 on the same H100 (docs/log/2026-11-27_several-clusters.md).
MIN_TIMED_S = 0.1
MAX_REPEATS = 51  # Odd, as every count it stops at: the median is a run.


def measure(case: Case, *, warm_up: bool = True, more_seeds=()) -> dict:
  """Train ``case`` at least ``case.repeats`` times after a warm-up call, more if short (an odd
  count, ``MIN_TIMED_S``); the median run's times, and
  its score (the mean over ``more_seeds`` too, trained with the same compiled function)."""
  import jax
  cfg = case.cfg
  ds = dataset(cfg)
  init = jax.tree.map(np.asarray, trainers.init_params(cfg, ds))  # Host copies: reusable.
  trainer = make_trainer(case, ds, init)
  compile_s = trainer.compile()
  if case.impl != "numpy" and warm_up:  # Warm up (one call), then start again from the start.
    runner.timed_epochs(trainer, getattr(trainer, "epochs_per_call", 1))
    trainer.set_params(init)
  runs = []
  # (Not where one run was asked for: --quick, and the slow cases.)
  while len(runs) < case.repeats or (case.repeats > 1 and len(runs) < MAX_REPEATS and (
      sum(run[0] for run in runs) < MIN_TIMED_S or len(runs) % 2 == 0)):
    if runs:
      trainer.set_params(init)
    times, losses = runner.timed_epochs(trainer, cfg.epochs, cfg.sync_every, cfg.overlap)
    runs.append((sum(times), times, losses))
  total, times, losses = sorted(runs, key=lambda run: run[0])[len(runs) // 2]
  epochs = len(times)  # Fewer than cfg.epochs if the run diverged.
  steps = epochs * (len(ds.train_labels) // cfg.batch_size)
  mem = trainer.memory_bytes()
  result = dict(
      group=case.group, workload=case.workload, impl=case.impl, variant=case.variant,
      fusion=cfg.fusion,  # None but for pallas.
      backend=paths.backend(cfg) if case.impl == "pallas" else None,
      path=paths.describe(cfg) if case.impl in ("xla", "pallas") else case.impl,
      optimizer=optimizer_name(cfg), lr=cfg.lr, batch_size=cfg.batch_size, epochs=cfg.epochs,
      epochs_per_call=getattr(trainer, "epochs_per_call", 1),
      n_train=len(ds.train_labels),
      repeats=len(runs), train_time_s=total, epoch_time_s=total / epochs,
      steps_per_s=steps / total, samples_per_s=steps * cfg.batch_size / total,
      compile_time_s=compile_s or None, tune_time_s=getattr(trainer, "tune_time_s", None) or None,
      device_memory_mb=mem / 2**20 if mem else None, epoch_times=times, epoch_losses=losses,
      diverged=not all(np.isfinite(losses)))
  if result["diverged"]:  # No accuracy for a diverged network: the row says so instead.
    return result
  scores = [score(trainer, cfg)]
  if more_seeds:
    scores += seed_scores(case, trainer.fn, more_seeds)
  if case.group.startswith("grid"):
    result["seed_scores"] = scores
    if None in scores:
      result["diverged"] = True
      return result
  result["final_mse" if cfg.model == "regression" else "test_accuracy"] = float(np.mean(scores))
  return result


def optimizer_name(cfg: config.Config) -> str:
  return f"momentum {cfg.momentum:g}" if cfg.optimizer == "momentum" else cfg.optimizer


def training_line(results: list[dict]) -> str:
  """How each workload's reference configuration trains, from its first row."""
  first = {}
  for r in results:
    if r["group"] == "workloads" and r["impl"] != "numpy":  # numpy may run fewer epochs.
      first.setdefault(r["workload"], r)
  return "Training: " + "; ".join(
      f"{w} {r['optimizer']}, lr {r['lr']:g}, batch {r['batch_size']}, {r['epochs']} epochs"
      for w, r in first.items()) + "."


def _precision(r) -> str:
  """The precision a row ran at, from its variant: "tf32", "batch 1024, tf32", ..."""
  last = r["variant"].split(", ")[-1]
  return last if last in ("tf32", "bfloat16") else "float32"


def add_speedups(results: list[dict]) -> None:
  """Samples/s over the NumPy reference of the same workload, and over the torch CUDA-graph peer
  of the same workload, batch size and precision (none where no such peer ran)."""
  peer = {(r["workload"], r["batch_size"], _precision(r)): r for r in results
          if r["impl"] == "torch-graph"}
  numpy = {r["workload"]: r for r in results if r["impl"] == "numpy"}
  for r in results:
    numpy_mlp = numpy.get(r["workload"])
    torch_ref = peer.get((r["workload"], r["batch_size"], _precision(r)))
    r["x_numpy"] = r["samples_per_s"] / numpy_mlp["samples_per_s"] if numpy_mlp else None
    r["x_torch_graph"] = r["samples_per_s"] / torch_ref["samples_per_s"] if torch_ref else None


def fmt(v, digits=3):
  if v is None:
    return "–"
  if isinstance(v, float):
    if v >= 1000:
      return f"{v:,.0f}"
    return f"{v:.{digits}g}" if abs(v) < 100 else f"{v:.1f}"
  return str(v)


def table(results: list[dict], group: str) -> str:
  cols = ["workload", "impl", "variant", "batch_size", "epochs", "n_train", "train_time_s",
          "epoch_time_s", "samples_per_s", "compile_time_s", "device_memory_mb",
          "test_accuracy", "final_mse", "x_numpy", "x_torch_graph"]
  heads = ["workload", "impl", "variant", "batch", "epochs", "examples", "train s", "s/epoch",
           "samples/s", "compile s", "memory MB", "accuracy", "final MSE", "× numpy",
           "× torch graph"]
  rows = [r for r in results if r["group"] == group]
  lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
  for r in rows:
    cells = ["diverged" if r.get("diverged") and c in ("test_accuracy", "final_mse")
             else fmt(r.get(c)) for c in cols]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def meta() -> dict:
  import jax
  import jaxlib
  d = jax.devices()[0]
  info = {"date": datetime.date.today().isoformat(), "device": f"{d.platform}: {d.device_kind}",
          "jax": jax.__version__, "jaxlib": jaxlib.__version__, "numpy": np.__version__,
          "python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
          "command": " ".join(["python -m benchmarks.bench", *sys.argv[1:]])}
  try:
    info["driver"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        capture_output=True, text=True, timeout=30).stdout.strip() or None
  except (OSError, subprocess.SubprocessError):
    info["driver"] = None
  for name in ("triton", "torch"):
    try:
      info[name] = __import__(name).__version__
    except ImportError:
      info[name] = None
  return info


def write_outputs(results, info, out_dir: pathlib.Path, notes: list[str]) -> list[str]:
  out_dir.mkdir(parents=True, exist_ok=True)
  runner.write_json({"meta": info, "results": results}, out_dir / "results.json")
  table_csv = io.StringIO(newline="")
  w = csv.DictWriter(table_csv, fieldnames=COLUMNS, extrasaction="ignore")
  w.writeheader()
  w.writerows(results)
  files.write_atomically(out_dir / "results.csv", table_csv.getvalue())
  plots = draw_plots(results, out_dir, notes) if _PLOTS.value else []
  versions = ", ".join(f"{k} {info[k]}" for k in ("jax", "jaxlib", "triton", "torch", "numpy")
                       if info.get(k))
  md = ["# Benchmark results\n",
        f"Generated by `{info['command']}` on {info['date']}: {info['device']}"
        f"{', driver ' + info['driver'] if info.get('driver') else ''}; CPU baseline on "
        f"{info['cpu']}; {versions}; Python {info['python']}.\n",
        " ".join(__doc__.split("\n\n")[2].split()) + "\n",  # The method paragraph.
        "Memory: for jax, the compiled training function's arguments, outputs and temporaries "
        "(less what is aliased); for torch, the peak allocated since the trainer was built.\n"]
  titles = {"workloads": "Workloads (reference configurations)",
            "techniques": "Techniques, on the MLP (each changes one thing)",
            "batch": "MLP batch size", "blocks": "Pallas block sizes, on the MLP"}
  for group, title in titles.items():
    if any(r["group"] == group for r in results):
      md += [f"## {title}\n"] + ([training_line(results) + "\n"] if group == "workloads" else [])
      md += [table(results, group) + "\n"]
  if info.get("end_to_end"):
    md += ["## Time to a trained network (fresh processes, cold and warm)\n",
           end_to_end.table(info["end_to_end"]) + "\n"]
  md += [f"![{p}]({p})\n" for p in plots]
  md += [f"- {n}\n" for n in notes]
  files.write_atomically(out_dir / "RESULTS.md", "\n".join(md))
  return plots


def grid_rows(results: list[dict]) -> list[dict]:
  """One row a grid point: xla beside pallas, and pallas' speedup in train time."""
  by = {(r["variant"], r["impl"]): r for r in results if r["group"] == "grid"}
  rows = []
  for point in dict.fromkeys(r["variant"] for r in results if r["group"] == "grid"):
    x, p = by.get((point, "xla")), by.get((point, "pallas"))
    if not (x and p):
      continue
    metric = "final_mse" if x["workload"] == "regression" else "test_accuracy"
    alts = {r["path"]: x["train_time_s"] / r["train_time_s"] for r in results
            if r["group"] == "grid-alt" and r["variant"] == point
            and r["path"] != p["path"]}  # (merged: an earlier run's other path may be today's)
    rows.append(dict(point=point, epochs=x["epochs"], xla_s=x["epoch_time_s"],
                     pallas_s=p["epoch_time_s"], speedup=x["train_time_s"] / p["train_time_s"],
                     path=p["path"], xla_compile_s=x["compile_time_s"],
                     pallas_compile_s=p["compile_time_s"], metric=metric,
                     xla_score=x.get(metric), pallas_score=p.get(metric),
                     seeds=len(x.get("seed_scores", [0])), alternatives=alts))
  return rows


def grid_summary(rows: list[dict]) -> str:
  speedups = [r["speedup"] for r in rows]
  if not speedups:
    return "no grid point ran"
  worst = min(rows, key=lambda r: r["speedup"])
  return (f"{len(rows)} points: geometric mean {np.exp(np.mean(np.log(speedups))):.2f}x, "
          f"lowest {worst['speedup']:.2f}x ({worst['point']}); "
          f"{sum(s < 2 for s in speedups)} below 2x, {sum(s < 1 for s in speedups)} below 1x")


def write_grid(results, info, out_dir: pathlib.Path, notes: list[str]) -> list[dict]:
  rows = grid_rows(results)
  out_dir.mkdir(parents=True, exist_ok=True)
  runner.write_json({"meta": info, "rows": rows, "results": results, "notes": notes},
                    out_dir / "grid.json")
  shown = lambda r, v: ("diverged" if v is None else f"{100 * v:.2f} %"
                        if r["metric"] == "test_accuracy" else f"{v:.4g}")
  md = ["# The breadth grid: pallas beside xla\n",
        f"Generated by `{info['command']}` on {info['date']}: {info['device']}, jax "
        f"{info['jax']}, jaxlib {info['jaxlib']}.\n",
        "One setting changed at a time from each workload's reference (`benchmarks.grid`). Time: "
        "the median of the bench's repeats of the whole training, from the first seed; speedup "
        "is xla's train time over pallas'. Compile time apart. Score: test accuracy (final "
        "training MSE for the regression net), the mean over the seeds.\n",
        f"**{grid_summary(rows)}.**\n",
        "| point | epochs | xla s/epoch | pallas s/epoch | pallas vs xla | pallas path | "
        "other paths | compile s xla / pallas | xla score | pallas score |",
        "|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    others = ", ".join(f"{p} {s:.2f}x" for p, s in r["alternatives"].items()) or "–"
    md.append(f"| {r['point']} | {r['epochs']} | {fmt(r['xla_s'], 4)} | {fmt(r['pallas_s'], 4)} "
              f"| {r['speedup']:.2f}x | {r['path']} | {others} | {fmt(r['xla_compile_s'])} / "
              f"{fmt(r['pallas_compile_s'])} | {shown(r, r['xla_score'])} | "
              f"{shown(r, r['pallas_score'])} |")
  if _PLOTS.value and rows:
    try:
      import matplotlib
      matplotlib.use("Agg")
      import matplotlib.pyplot as plt
      fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.2))
      ax.barh(range(len(rows)), [r["speedup"] for r in rows])
      ax.set_yticks(range(len(rows)), [r["point"] for r in rows], fontsize=7)
      ax.invert_yaxis()
      for x in (1, 2):
        ax.axvline(x, color="gray", lw=0.8, ls="--" if x == 2 else "-")
      ax.set(xlabel="pallas speedup over xla (train time)", title=info["device"])
      fig.tight_layout()
      fig.savefig(out_dir / "grid.png", dpi=110)
      plt.close(fig)
      md.append("\n![speedup per point](grid.png)")
    except ImportError:
      notes.append("plot skipped: matplotlib is not installed (pip install -e '.[plots]')")
  md += [""] + [f"- {n}" for n in notes]
  files.write_atomically(out_dir / "GRID.md", "\n".join(md) + "\n")
  return rows


def draw_plots(results, out_dir: pathlib.Path, notes: list[str]) -> list[str]:
  try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
  except ImportError:
    notes.append("plots skipped: matplotlib is not installed (pip install -e '.[plots]')")
    return []
  ref = [r for r in results if r["group"] == "workloads" and r["workload"] == "mlp"]
  files = []

  def save(fig, name):
    fig.tight_layout()
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    files.append(name)

  fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
  for r in ref:
    epochs = range(1, len(r["epoch_times"]) + 1)
    a1.plot(epochs, np.cumsum(r["epoch_times"]), marker="o", label=r["impl"])
    a2.plot(epochs, r["epoch_losses"], marker="o", label=r["impl"])
  a1.set(xlabel="epoch", ylabel="cumulative training time (s)", yscale="log",
         title="MLP: training time")
  a2.set(xlabel="epoch", ylabel="mean training loss", yscale="log", title="MLP: loss")
  a1.legend(), a2.legend()
  save(fig, "mlp_time_and_loss.png")

  rows = [r for r in results if r["group"] == "workloads" and r["impl"] != "numpy"]
  if rows:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in ((axes[0], "x_numpy", "speedup over NumPy (CPU)"),
                           (axes[1], "x_torch_graph", "speedup over PyTorch CUDA graph")):
      shown = [r for r in rows if r.get(key)]
      ax.bar(range(len(shown)), [r[key] for r in shown])
      ax.set_xticks(range(len(shown)), [f"{r['workload']}\n{r['impl']}" for r in shown],
                    fontsize=7, rotation=45)
      ax.set(yscale="log", title=title, ylabel="× samples/s")
      ax.axhline(1, color="gray", lw=0.8)
    save(fig, "speedups.png")

  batch = [r for r in results if r["workload"] == "mlp" and r["impl"] in
           ("xla", "pallas", "torch-graph") and _precision(r) == "float32" and
           (r["group"] == "batch" or (r["group"] == "workloads"))]
  if batch:
    fig, ax = plt.subplots(figsize=(6, 4))
    for impl in ("xla", "pallas", "torch-graph"):
      pts = sorted((r["batch_size"], r["epoch_time_s"]) for r in batch if r["impl"] == impl)
      if pts:
        ax.plot(*zip(*pts), marker="o", label=impl)
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="time per epoch (s)",
           title="MLP: time per epoch against batch size (float32)")
    ax.legend()
    save(fig, "mlp_batch_size.png")
  return files


def out_dir() -> pathlib.Path:
  """--out_dir. A --quick run without one writes to the system's temp folder: a structural run
  never replaces the measured tables in docs/."""
  if _QUICK.value and not flags.FLAGS["out_dir"].present:
    return pathlib.Path(tempfile.gettempdir()) / "jaxshallow-bench-quick"
  if not _OUT_DIR.value:
    raise config.ConfigError("--out_dir must name a folder")
  return pathlib.Path(_OUT_DIR.value)


def merge_grids(files) -> None:
  """One GRID.md, grid.json and grid.png in --out_dir from several runs' grid.json, the rows in
  the grid's order."""
  import json
  cli.writable(out_dir() / "grid.json", "--out_dir")
  runs = []
  for f in files:
    try:
      runs.append(json.loads(pathlib.Path(f).read_text()))
    except (OSError, ValueError) as e:
      raise config.ConfigError(f"cannot read {f}: {getattr(e, 'strerror', None) or e}") from None
    if not (isinstance(runs[-1], dict) and {"meta", "results"} <= runs[-1].keys()):
      raise config.ConfigError(f"{f} is not a grid.json of benchmarks.bench --grid")
  info = dict(runs[0]["meta"], command=f"python -m benchmarks.bench --grid --merge=<{len(runs)} "
              "runs>; each run: " + runs[0]["meta"]["command"].split(" --points")[0])
  if len({(r["meta"]["device"], r["meta"]["jax"]) for r in runs}) > 1:
    raise config.ConfigError("the runs to merge come from different devices or jax versions")
  results, notes = results_and_notes(runs)
  rows = write_grid(in_grid_order(results), info, out_dir(),
                    notes + [f"merged from {len(runs)} runs of one process a point, one device"])
  print(grid_summary(rows))


def in_grid_order(results) -> list:
  """Grid results in benchmarks.grid's order of points (a stable sort: a point's runs keep their
  order, the later last); points the grid does not name (an older grid's) after them."""
  order = [p.name for p in grid.GRID]
  return sorted(results, key=lambda row: order.index(row["variant"]) if row["variant"] in order
                else len(order))


def results_and_notes(runs) -> tuple[list, list]:
  """Several grid.json runs' results one after the other, and their notes, each once (runs
  before 2026-12-06 kept none)."""
  return ([row for r in runs for row in r["results"]],
          list(dict.fromkeys(n for r in runs for n in r.get("notes", []))))


def grid_in_jobs(jobs: int) -> None:
  """--grid --quick --jobs=N: the points dealt in turn to N processes of this script running at
  once (the CI's two cores), each writing its grid.json to a temporary folder, then one GRID.md
  and grid.json in --out_dir with the rows in the grid's order."""
  import json
  names = [p.name for p in grid.points(_POINTS.value)]
  parts = [names[i::jobs] for i in range(jobs) if names[i::jobs]]
  same = ["--grid", "--quick", f"--seeds={','.join(_SEEDS.value)}", "--plots=false",
          f"--{'' if _ALTERNATIVES.value else 'no'}alternatives",
          f"--{'' if flags.FLAGS.forbid_triton else 'no'}forbid_triton"]
  same += [f"--data_dir={_DATA_DIR.value}"] if _DATA_DIR.value else []
  # On a GPU each process would take 75 % of its memory at start: they take what they use.
  env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
  with tempfile.TemporaryDirectory() as tmp:
    folders = [pathlib.Path(tmp) / str(i) for i in range(len(parts))]
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.bench", *same,
                               f"--points={','.join(part)}", f"--out_dir={folder}"], env=env)
             for part, folder in zip(parts, folders)]
    failed = [i for i, p in enumerate(procs) if p.wait() != 0]
    # A process that failed for a diverged point wrote its grid.json first: those rows too.
    runs = [json.loads(f.read_text()) for folder in folders
            if (f := folder / "grid.json").exists()]
  if runs:
    results, notes = results_and_notes(runs)
    results = in_grid_order(results)
    notes.append(f"{len(parts)} processes at once (--jobs): the times are not measurements")
    info = dict(runs[0]["meta"], command=" ".join(["python -m benchmarks.bench", *sys.argv[1:]]))
    rows = write_grid(results, info, out_dir(), notes)
    print(grid_summary(rows))
    print(f"wrote {out_dir() / 'GRID.md'}, grid.json")
  if failed:
    sys.exit(f"error: {len(failed)} of the {len(parts)} processes failed (their messages above)")


IMPLS = ("numpy", "xla", "pallas", "triton", "torch")


def check_flags() -> list[int]:
  """Every flag's value, before anything is printed, loaded or compiled; the seeds."""
  cli.known("--workloads", _WORKLOADS.value, tuple(BASE))
  cli.known("--impls", _IMPLS.value, IMPLS)
  cli.known("--torch_modes", _TORCH_MODES.value, torch_peer.MODES, empty=True)
  cli.known("--cnn_precisions", _CNN_PRECISIONS.value, ("tf32", "bfloat16"), empty=True)
  cli.known("--batch_precisions", _BATCH_PRECISIONS.value, ops.PRECISIONS, empty=True)
  known = [name for name, _, _ in TECHNIQUES]
  if unknown := [n for n in _TECHNIQUE_NAMES.value if n not in known]:
    raise config.ConfigError(f"unknown --technique_names {', '.join(unknown)}; the techniques "
                             f"are: {'; '.join(known)}")
  cli.at_least("repeats", _REPEATS.value, 1)
  cli.at_least("numpy_epochs", _NUMPY_EPOCHS.value, 1)
  cli.at_least("numpy_cnn_train_limit", _NUMPY_CNN_LIMIT.value, 1)
  if _BATCH_SIZES.value:
    cli.ints("batch_sizes", _BATCH_SIZES.value)
  for blocks in _BLOCK_SWEEP.value:
    try:
      ops.parse_blocks(blocks)
    except ValueError as e:
      raise config.ConfigError(str(e)) from None
  seeds = cli.ints("seeds", _SEEDS.value, low=0)
  cli.at_least("jobs", _JOBS.value, 1)
  if _JOBS.value > 1 and not (_GRID.value and _QUICK.value):
    raise config.ConfigError("--jobs needs --grid --quick: the times of processes that share "
                             "the machine would mean nothing")
  try:
    grid.points(_POINTS.value)
  except ValueError as e:
    raise config.ConfigError(str(e)) from None
  out = out_dir() / ("grid.json" if _GRID.value else "results.json")
  cli.writable(out, "--out_dir")
  return seeds


def main(argv):
  del argv
  if _MERGE.value:
    return merge_grids(_MERGE.value)
  seeds = check_flags()
  if _QUICK.value:  # A structural check, whose times mean nothing: XLA's shortest compiles
    quick.lowest_cpu_level()
  # The tables' compile times are cold; --end_to_end measures the compilation cache.
  os.environ.setdefault(compile_cache.ENV_VAR, "off")
  if _JOBS.value > 1:
    return grid_in_jobs(_JOBS.value)
  notes, impls = [], [] if _GRID.value else list(_IMPLS.value)
  try:
    if "torch" in impls and (why := torch_peer.available()):
      print(f"notice: PyTorch peer skipped: {why}", file=sys.stderr)
      notes.append(f"PyTorch peer skipped: {why}")
      impls.remove("torch")
    if "triton" in impls:
      import triton_kernels
      if why := triton_kernels.unavailable():
        print(f"notice: the triton impl skipped: it needs {why}", file=sys.stderr)
        notes.append(f"triton impl skipped: it needs {why}")
        impls.remove("triton")
    cases = grid_cases() if _GRID.value else build_cases(impls)
    folder = out_dir()
  except ValueError as e:
    raise config.ConfigError(str(e)) from None
  import jax
  if jax.default_backend() != "gpu":
    notes.append(f"no GPU: jax ran on {jax.default_backend()}; Pallas kernels were interpreted")
  results = []
  for i, case in enumerate(cases, 1):
    if case.impl in ("torch-graph", "torch-compile-max") and not _gpu_for_torch():
      if not any(case.impl in n for n in notes):
        notes.append(f"{case.impl} peer skipped: CUDA graphs need a GPU")
      continue
    with guard_flags.guard(case.impl == "pallas" and paths.backend(case.cfg) == "mosaic"):
      r = measure(case, warm_up=not _QUICK.value,
                  more_seeds=seeds[1:] if case.group == "grid" else ())
    results.append(r)
    if r["diverged"]:
      notes.append(f"{r['workload']} {r['impl']} {r['variant']}: diverged (loss "
                   f"{r['epoch_losses'][-1]}) in epoch {len(r['epoch_losses'])}; no accuracy")
    print(f"[{i}/{len(cases)}] {r['workload']:10s} {r['impl']:11s} {r['variant']:32s} "
          f"{r['epoch_time_s']:9.4f} s/epoch  {r['samples_per_s']:12,.0f} samples/s", flush=True)
  if _GRID.value:
    rows = write_grid(results, meta(), folder, notes)
    print(grid_summary(rows))
    print(f"wrote {folder / 'GRID.md'}, grid.json")
  else:
    add_speedups(results)
    info = meta()
    if _END_TO_END.value:
      extra = [f"--data_dir={_DATA_DIR.value}"] if _DATA_DIR.value else []
      info["end_to_end"] = [end_to_end.measure(w, impl, extra) for w in _WORKLOADS.value
                            if w in ("mlp", "cnn", "logreg")
                            for impl in ("xla", "pallas") if impl in impls]
    write_outputs(results, info, folder, notes)
    print(table(results, "workloads"))
    print(f"wrote {folder / 'RESULTS.md'}, results.json, results.csv")
  diverged = [r for r in results if r["diverged"]]
  if diverged:
    sys.exit(f"error: {len(diverged)} configuration(s) diverged (see the notes in RESULTS.md); "
             f"try a smaller --lr")


def _gpu_for_torch() -> bool:
  try:
    import torch
    return torch.cuda.is_available()
  except ImportError:
    return False


if __name__ == "__main__":
  cli.run(main)
