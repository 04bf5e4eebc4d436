"""Do two implementations train the same network? Per-epoch losses, free-running and in lockstep,
or each against exact arithmetic.

  python -m experiments.parity --impls=xla,pallas
  python -m experiments.parity --reference=float64 --seeds=0,1,2 --point="mlp hidden 1024"
  python -m experiments.parity --reference=float64 --seeds=0,1,2 --epochs=1 --point=all \
      --out_dir=/tmp/parity        # every grid point: PARITY.md and parity.json, point by point
  python -m experiments.parity --merge=a/parity.json,b/parity.json --out_dir=/tmp/parity

Free-running: each impl trains on its own from the same initial weights and batch order. Rounding
differences (summation order) grow through training, the more so at a high learning rate, so
free-running losses drift apart even between two runs of one XLA program on different devices.
Lockstep: at the start of every epoch both impls are given the reference impl's parameters and
optimizer state, so each epoch's loss difference measures that epoch's arithmetic alone.

``--reference=float64``: the distance from exact arithmetic, which does not depend on which
float32 trajectory a reference happens to take. The NumPy reference trains in float64 from the
same start; at every epoch each impl of ``--impls`` starts from the float64 run's parameters and
optimizer state and trains that epoch in its own precision. The check passes where, at every
epoch and seed, the second impl's distance of its epoch loss from the float64 one is at most
twice the first's, plus 1e-6 of the loss.

Several grid points (``--point=a,b`` or ``all``, with ``--out_dir``): the float64 check at each,
one process for all, the table (PARITY.md, parity.json) written again after each point, so that
a run cut short keeps what it measured; ``--merge`` joins the tables of several runs (a later
run's point replaces an earlier one's).

``--float64_cache=DIR`` keeps each float64 run (its state before each epoch and its epoch
losses, by network, seed and epochs) and reads it back in later runs; ``--float64_only`` trains
and keeps those runs alone, no impl: the NumPy runs, the slow part (about 90 s a seed-epoch for
the CNN), then take a CPU instead of the GPU's time.

XLA runs with ``--xla_gpu_deterministic_ops=true`` here (unless XLA_FLAGS already sets it):
without it the xla reference took different float32 trajectories in different processes
(XLA's per-process autotuning, probably), so a lockstep verdict changed from run to run.
"""

import os
import sys

if "xla_gpu_deterministic_ops" not in os.environ.get("XLA_FLAGS", ""):  # Before jax starts.
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_gpu_deterministic_ops=true").strip()

from absl import flags

import dataclasses
import hashlib
import io
import json
import pathlib
import time

import numpy as np

from benchmarks import grid
from experiments import config_flags
from jaxshallow import files, paths
from jaxshallow.run import cli, config, runner, trainers

_IMPLS = flags.DEFINE_list("impls", ["xla", "pallas"], "Reference impl, then the one to check.")
_TOL = flags.DEFINE_float("tolerance", 1e-3, "Allowed relative difference of lockstep losses.")
_REFERENCE = flags.DEFINE_string("reference", "impl", "impl: the first of --impls is the "
                                 "reference (free-running and lockstep); float64: both against "
                                 "the NumPy reference in float64, epoch by epoch.")
_SEEDS = flags.DEFINE_list("seeds", [], "--reference=float64: the seeds to check (default: "
                           "--seed).")
_POINT = flags.DEFINE_list("point", None, "Train this point of the breadth grid "
                           "(benchmarks.grid) instead of the flags' network (--epochs, "
                           "--train_limit and --data_dir still apply); with "
                           "--reference=float64 and --out_dir, several (comma-separated) or "
                           "all.")
_OUT = flags.DEFINE_string("out", None, "Write the comparison as JSON to this file.")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "Several points: write PARITY.md and "
                               "parity.json here, again after each point.")
_CACHE = flags.DEFINE_string("float64_cache", None, "--reference=float64: keep the float64 runs "
                             "in this folder and read them back where kept (by network, seed "
                             "and epochs).")
_ONLY64 = flags.DEFINE_bool("float64_only", False, "With --float64_cache: train and keep the "
                            "float64 runs alone (no impl; a CPU will do).")
_MERGE = flags.DEFINE_list("merge", [], "Train nothing: one PARITY.md and parity.json in "
                           "--out_dir from these parity.json files (of --out_dir runs).")
# The flags that still apply with --point (the rest are the point's).
WITH_POINT = ("epochs", "seed", "train_limit", "test_limit", "data_dir", "fusion", "numpy_dtype")
# The float64 check: the checked impl's distance from float64 at most RATIO times the
# reference impl's, plus SLACK of the loss.
RATIO, SLACK = 2.0, 1e-6


def compare(cfg_ref: config.Config, cfg_new: config.Config, log=print) -> dict:
  ds = runner.load_data(cfg_ref)
  # Epoch by epoch: one epoch a compiled call.
  ref, new, lock = (trainers.make_trainer(dataclasses.replace(c, epochs_per_call=1), ds)
                    for c in (cfg_ref, cfg_new, cfg_new))
  for t in (ref, new, lock):
    t.compile()
  rows = []
  log(f"{'epoch':>5} {cfg_ref.impl:>10} {cfg_new.impl:>10} {'free rel':>9} "
      f"{'lockstep':>10} {'lock rel':>9}")
  for e in range(cfg_ref.epochs):
    lock.set_state(ref.get_state())
    loss_ref, loss_new, loss_lock = ref.run_epoch(e), new.run_epoch(e), lock.run_epoch(e)
    rows.append(dict(epoch=e + 1, ref=loss_ref, free=loss_new, lockstep=loss_lock,
                     free_rel=abs(loss_new / loss_ref - 1), lock_rel=abs(loss_lock / loss_ref - 1)))
    r = rows[-1]
    log(f"{e + 1:5d} {loss_ref:10.6f} {loss_new:10.6f} {r['free_rel']:9.1e} {loss_lock:10.6f} "
        f"{r['lock_rel']:9.1e}")
  # Classifiers: test accuracy; the regression net: its final training MSE (as the benchmark).
  if cfg_ref.model == "regression":
    metric, split, key, show = "final_mse", "train", "loss", lambda v: f"{v:.6f}"
  else:
    metric, split, key, show = "test_accuracy", "test", "accuracy", lambda v: f"{100 * v:.2f}%"
  got = {cfg_ref.impl: ref.evaluate(split)[key], cfg_new.impl: new.evaluate(split)[key]}
  worst = max(r["lock_rel"] for r in rows)
  log(f"{metric.replace('_', ' ')} {cfg_ref.impl} {show(got[cfg_ref.impl])}, {cfg_new.impl} "
      f"{show(got[cfg_new.impl])} (free-running); worst lockstep epoch-loss difference "
      f"{worst:.1e}")
  return {"ref": cfg_ref.impl, "new": cfg_new.impl, "epochs": rows, metric: got,
          "worst_lockstep_rel": worst, **runner.device_info(cfg_new.impl)}


def as_float32(tree):
  return [{k: np.asarray(v, np.float32) for k, v in layer.items()} for layer in tree]


# What the float64 run depends on (the cache's key): the network, its data and its training.
FLOAT64_KEY = ("model", "dataset", "epochs", "batch_size", "lr", "optimizer", "momentum",
               "hidden", "bias", "seed", "train_limit", "holdout")


def float64_run(base, seed: int, ds, cache_dir: str | None, log=print):
  """The NumPy float64 run of ``base`` at ``seed``: its state before each epoch and each
  epoch's loss, read from ``cache_dir`` where a run of the same network, seed and epochs was
  kept, else trained (and kept there)."""
  import jax
  cfg = dataclasses.replace(base, seed=seed, impl="numpy", numpy_dtype="float64",
                            precision="float32", fusion=None, blocks=None)
  exact = trainers.make_trainer(cfg, ds)
  key = json.dumps({k: getattr(cfg, k) for k in FLOAT64_KEY}, sort_keys=True, default=str)
  path = (pathlib.Path(cache_dir) / f"float64_{hashlib.sha256(key.encode()).hexdigest()[:16]}"
          f".npz") if cache_dir else None
  structure = jax.tree.structure(exact.get_state())
  if path is not None and path.exists():
    with np.load(path) as kept:
      if str(kept["key"]) == key:
        n = structure.num_leaves
        states = [structure.unflatten([kept[f"e{e}_{i}"] for i in range(n)])
                  for e in range(base.epochs)]
        log(f"seed {seed}: the float64 run from {path}")
        return states, [float(v) for v in kept["losses"]]
  states, losses = [], []
  for e in range(base.epochs):
    states.append(exact.get_state())
    losses.append(exact.run_epoch(e))
  if path is not None:
    leaves = {f"e{e}_{i}": np.asarray(v) for e, st in enumerate(states)
              for i, v in enumerate(jax.tree.leaves(st))}
    data = io.BytesIO()
    np.savez(data, key=key, losses=np.asarray(losses), **leaves)
    files.write_atomically(path, data.getvalue())
    log(f"seed {seed}: the float64 run kept in {path}")
  return states, losses


def float64_distances(cfgs, seeds, log=print, cache_dir: str | None = None) -> dict:
  """Each epoch, both impls of ``cfgs`` start from the float64 run's state (``float64_run``);
  the distance of each one's epoch loss from the float64 epoch's. One compile an impl, reused by
  every seed."""
  base = cfgs[0]
  compiled, rows = {}, []
  log(f"{'seed':>4} {'epoch':>5} {'float64':>12} {'d ' + cfgs[0].impl:>10} "
      f"{'d ' + cfgs[1].impl:>10} {'ratio':>7}  ok")
  for seed in seeds:
    ds = runner.load_data(dataclasses.replace(base, seed=seed))
    states, losses = float64_run(base, seed, ds, cache_dir, log)
    checked = []
    for cfg in cfgs:
      t = trainers.make_trainer(dataclasses.replace(cfg, seed=seed, epochs_per_call=1), ds)
      if cfg.impl in compiled:
        t.fn = compiled[cfg.impl]  # The same shapes: no second compile.
      else:
        t.compile()
        compiled[cfg.impl] = t.fn
      checked.append(t)
    for e in range(base.epochs):
      params, leaves = states[e]
      state = (as_float32(params), [np.asarray(v, np.float32) for v in leaves])
      loss64 = losses[e]
      d = []
      for t in checked:
        t.set_state(state)
        d.append(abs(t.run_epoch(e) - loss64))
      ok = d[1] <= RATIO * d[0] + SLACK * abs(loss64)
      rows.append(dict(seed=seed, epoch=e + 1, float64=loss64, d_ref=d[0], d_new=d[1], ok=ok))
      log(f"{seed:4d} {e + 1:5d} {loss64:12.8f} {d[0]:10.2e} {d[1]:10.2e} "
          f"{d[1] / d[0] if d[0] else float('inf'):7.2f}  {'yes' if ok else 'NO'}")
  passed = all(r["ok"] for r in rows)
  # Over all epochs and seeds too: one epoch's distance is chaotic (either impl's can land
  # near float64 by chance), so the largest and the mean say more than any one ratio.
  spread = {k: {"max": max(r[k] for r in rows), "mean": float(np.mean([r[k] for r in rows]))}
            for k in ("d_ref", "d_new")}
  log(f"distance from float64, largest and mean: {cfgs[0].impl} {spread['d_ref']['max']:.2e} "
      f"{spread['d_ref']['mean']:.2e}, {cfgs[1].impl} {spread['d_new']['max']:.2e} "
      f"{spread['d_new']['mean']:.2e}")
  log(f"{cfgs[1].impl} within {RATIO:g}x {cfgs[0].impl}'s distance from float64 (+{SLACK:g} of "
      f"the loss) at every epoch of seeds {','.join(map(str, seeds))}: "
      f"{'yes' if passed else 'no'}")
  return {"ref": cfgs[0].impl, "new": cfgs[1].impl, "reference": "float64", "rows": rows,
          "spread": spread, "passed": passed, **runner.device_info(cfgs[1].impl)}


def point_names() -> list[str] | None:
  """The points of --point (``all``: every grid point), checked; None without --point."""
  if _POINT.value is None:
    return None
  names = [p.name for p in grid.GRID] if _POINT.value == ["all"] else _POINT.value
  try:
    grid.points(names)
  except ValueError as e:
    raise config.ConfigError(str(e)) from None
  return names


def configs(name: str | None = None) -> list[config.Config]:
  """The two impls' configs, from the flags or from the grid point ``name``. --fusion picks
  among the Pallas kernels: the other impl of the pair runs as it is."""
  if len(_IMPLS.value) != 2:
    raise config.ConfigError(f"--impls takes two impls, got {','.join(_IMPLS.value)}")
  flagged = config_flags.config_from_flags()
  if "impl" in flagged.given:
    raise config.ConfigError("--impl does not apply to experiments.parity: give --impls")
  if name is not None:
    (point,) = grid.points([name])
    if extra := [n for n in flagged.given if n not in WITH_POINT]:
      raise config.ConfigError(f"--{extra[0]} does not apply with --point: the point sets the "
                               "network")
  own = {"fusion": "pallas", "numpy_dtype": "numpy"}  # Flags of one impl of the pair.
  cfgs = []
  for impl in _IMPLS.value:
    given = tuple(n for n in flagged.given if own.get(n, impl) == impl)
    fusion = flagged.fusion if impl == "pallas" else None
    if name is not None:
      keep = {n: getattr(flagged, n) for n in given}
      cfg = point.config(impl=impl, **dict(keep, fusion=fusion, given=given))
    else:
      cfg = dataclasses.replace(flagged, impl=impl, fusion=fusion, given=given)
    cfgs.append(config.resolve(cfg))
  return cfgs


def sweep(names, seeds, out_dir: pathlib.Path) -> bool:
  """The float64 check at each point of ``names``, the table rewritten after each; whether
  every point passed."""
  points = []
  for name in names:
    print(f"== {name}", flush=True)
    cfgs = configs(name)
    r = float64_distances(cfgs, seeds or [cfgs[0].seed], cache_dir=_CACHE.value)
    points.append(dict(point=name, path=paths.describe(paths.resolve(cfgs[1])),
                       epochs=cfgs[0].epochs, seeds=sorted({row["seed"] for row in r["rows"]}),
                       **r))
    write_table(points, dict(date=time.strftime("%Y-%m-%d"), device=r["device"],
                             jax=r["jax_version"], ref=r["ref"], new=r["new"],
                             command="python -m experiments.parity " + " ".join(sys.argv[1:])),
                out_dir)
  return all(p["passed"] for p in points)


def write_table(points, meta, out_dir: pathlib.Path) -> None:
  """parity.json and PARITY.md: a row a point, its failing epochs named."""
  runner.write_json({"meta": meta, "points": points}, out_dir / "parity.json")
  lines = ["| point | pallas path | seeds | epochs | passed | failing (seed/epoch) | "
           "largest distance from float64, xla / pallas | mean, xla / pallas |",
           "|---|---|---|---|---|---|---|---|"]
  for p in points:
    fails = [f"{r['seed']}/{r['epoch']}" for r in p["rows"] if not r["ok"]]
    d = p["spread"]
    lines.append(f"| {p['point']} | {p['path']} | {','.join(map(str, p['seeds']))} | "
                 f"{p['epochs']} | {'yes' if p['passed'] else '**no**'} | "
                 f"{', '.join(fails) or '–'} | {d['d_ref']['max']:.2e} / {d['d_new']['max']:.2e} "
                 f"| {d['d_ref']['mean']:.2e} / {d['d_new']['mean']:.2e} |")
  passed = sum(p["passed"] for p in points)
  text = (f"# Float64 parity, point by point\n\nGenerated by `{meta['command']}` on "
          f"{meta['date']}: {meta['device']}, jax {meta['jax']}.\n\nEach epoch both impls start "
          f"from the NumPy float64 run's state; a point passes where, at every epoch of its "
          f"seeds, the {meta['new']} epoch loss is at most {RATIO:g}x as far from the float64 "
          f"one as the {meta['ref']} one, plus {SLACK:g} of the loss.\n\n"
          f"**{passed} of {len(points)} points passed.**\n\n" + "\n".join(lines) + "\n")
  files.write_atomically(out_dir / "PARITY.md", text)


def merge(paths_in, out_dir: pathlib.Path) -> None:
  """One table from several runs' parity.json: a later file's point replaces an earlier one's."""
  by_point, meta = {}, None
  for f in paths_in:
    try:
      run = json.loads(pathlib.Path(f).read_text())
    except (OSError, ValueError) as e:
      raise config.ConfigError(f"cannot read {f}: {getattr(e, 'strerror', None) or e}") from None
    if not (isinstance(run, dict) and {"meta", "points"} <= run.keys()):
      raise config.ConfigError(f"{f} is not a parity.json of experiments.parity --out_dir")
    if meta and (run["meta"]["device"], run["meta"]["jax"]) != (meta["device"], meta["jax"]):
      raise config.ConfigError("the runs to merge come from different devices or jax versions")
    meta = meta or run["meta"]
    by_point.update({p["point"]: p for p in run["points"]})
  order = [p.name for p in grid.GRID]
  points = sorted(by_point.values(), key=lambda p: order.index(p["point"]))
  write_table(points, dict(meta, command=f"python -m experiments.parity --merge=<{len(paths_in)} "
                           f"runs>"), out_dir)


def main(argv):
  del argv
  if _MERGE.value:
    if not _OUT_DIR.value:
      raise config.ConfigError("--merge writes its table to --out_dir: give it")
    cli.writable(pathlib.Path(_OUT_DIR.value) / "parity.json", "--out_dir")
    return merge(_MERGE.value, pathlib.Path(_OUT_DIR.value))
  if _REFERENCE.value not in ("impl", "float64"):
    raise config.ConfigError(f"--reference must be impl or float64, got {_REFERENCE.value!r}")
  cli.positive("tolerance", _TOL.value)
  if not _TOL.value < float("inf"):
    raise config.ConfigError(f"tolerance must be a finite number, got {_TOL.value}")
  if _SEEDS.value and _REFERENCE.value == "impl":
    raise config.ConfigError("--seeds applies to --reference=float64 (the lockstep comparison "
                             "trains --seed)")
  if flags.FLAGS["tolerance"].present and _REFERENCE.value == "float64":
    raise config.ConfigError("--tolerance applies to --reference=impl (float64's bound is twice "
                             "the first impl's distance)")
  if (_CACHE.value or _ONLY64.value) and _REFERENCE.value != "float64":
    raise config.ConfigError("--float64_cache and --float64_only take --reference=float64")
  if _ONLY64.value and not _CACHE.value:
    raise config.ConfigError("--float64_only keeps the float64 runs in --float64_cache: give it")
  if _ONLY64.value and (_OUT.value or _OUT_DIR.value):
    raise config.ConfigError("--float64_only writes no comparison: leave --out and --out_dir "
                             "out")
  seeds = cli.ints("seeds", _SEEDS.value, low=0) if _SEEDS.value else None
  if why := next(filter(None, (config.seed_problem("--seeds", s) for s in seeds or ())), None):
    raise config.ConfigError(why)
  names = point_names()
  if _ONLY64.value:  # The float64 runs of every point and seed, kept; no impl trains.
    for name in names or [None]:
      base = configs(name)[0]
      for seed in seeds or [base.seed]:
        float64_run(base, seed, runner.load_data(dataclasses.replace(base, seed=seed)),
                    _CACHE.value)
    return
  if _OUT_DIR.value is None and names and len(names) > 1:
    raise config.ConfigError("several points write their table to --out_dir: give it")
  if _OUT_DIR.value is not None and _REFERENCE.value != "float64":
    raise config.ConfigError("--out_dir (several points) takes --reference=float64")
  if _OUT_DIR.value is not None and names is None:
    raise config.ConfigError("--out_dir writes a table of grid points: give --point")
  if _OUT_DIR.value is not None and _OUT.value:
    raise config.ConfigError("--out is one comparison's file: with --out_dir, leave it out")
  cfgs = configs(names[0] if names else None)
  if _REFERENCE.value == "float64" and any(c.impl == "numpy" for c in cfgs):
    raise config.ConfigError("--reference=float64 compares impls that train in float32 (xla, "
                             "pallas, triton) with NumPy's float64 run: leave numpy out of --impls")
  cli.writable(_OUT.value)
  if _OUT_DIR.value is not None:
    cli.writable(pathlib.Path(_OUT_DIR.value) / "parity.json", "--out_dir")
    sys.exit(0 if sweep(names, seeds, pathlib.Path(_OUT_DIR.value)) else 1)
  if _REFERENCE.value == "float64":
    result = float64_distances(cfgs, seeds or [cfgs[0].seed], cache_dir=_CACHE.value)
  else:
    result = compare(*cfgs)
  if _REFERENCE.value == "impl":
    result["tolerance"] = _TOL.value
  if _OUT.value:
    runner.write_json(result, _OUT.value)
  ok = result["passed"] if _REFERENCE.value == "float64" else (
      result["worst_lockstep_rel"] <= _TOL.value)
  sys.exit(0 if ok else 1)


if __name__ == "__main__":
  cli.run(main)
