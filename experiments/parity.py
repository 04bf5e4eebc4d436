"""Do two implementations train the same network? Per-epoch losses, free-running and in lockstep,
or each against exact arithmetic.

  python -m experiments.parity --impls=xla,pallas
  python -m experiments.parity --reference=float64 --seeds=0,1,2 --point="mlp hidden 1024"

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

import numpy as np

from benchmarks import grid
from experiments import config_flags
from jaxshallow.run import cli, config, runner, trainers

_IMPLS = flags.DEFINE_list("impls", ["xla", "pallas"], "Reference impl, then the one to check.")
_TOL = flags.DEFINE_float("tolerance", 1e-3, "Allowed relative difference of lockstep losses.")
_REFERENCE = flags.DEFINE_string("reference", "impl", "impl: the first of --impls is the "
                                 "reference (free-running and lockstep); float64: both against "
                                 "the NumPy reference in float64, epoch by epoch.")
_SEEDS = flags.DEFINE_list("seeds", [], "--reference=float64: the seeds to check (default: "
                           "--seed).")
_POINT = flags.DEFINE_string("point", None, "Train this point of the breadth grid "
                             "(benchmarks.grid) instead of the flags' network (--epochs, "
                             "--train_limit and --data_dir still apply).")
_OUT = flags.DEFINE_string("out", None, "Write the comparison as JSON to this file.")
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


def float64_distances(cfgs, seeds, log=print) -> dict:
  """Each epoch, both impls of ``cfgs`` start from the float64 run's state; the distance of
  each one's epoch loss from the float64 epoch's. One compile an impl, reused by every seed."""
  base = cfgs[0]
  compiled, rows = {}, []
  log(f"{'seed':>4} {'epoch':>5} {'float64':>12} {'d ' + cfgs[0].impl:>10} "
      f"{'d ' + cfgs[1].impl:>10} {'ratio':>7}  ok")
  for seed in seeds:
    ds = runner.load_data(dataclasses.replace(base, seed=seed))
    exact = trainers.make_trainer(dataclasses.replace(
        base, seed=seed, impl="numpy", numpy_dtype="float64", precision="float32", fusion=None,
        blocks=None), ds)
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
      params, leaves = exact.get_state()
      state = (as_float32(params), [np.asarray(v, np.float32) for v in leaves])
      loss64 = exact.run_epoch(e)
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


def configs() -> list[config.Config]:
  """The two impls' configs, from the flags or from --point. --fusion picks among the Pallas
  kernels: the other impl of the pair runs as it is."""
  if len(_IMPLS.value) != 2:
    raise config.ConfigError(f"--impls takes two impls, got {','.join(_IMPLS.value)}")
  flagged = config_flags.config_from_flags()
  if "impl" in flagged.given:
    raise config.ConfigError("--impl does not apply to experiments.parity: give --impls")
  if _POINT.value is not None:
    try:
      (point,) = grid.points([_POINT.value])
    except ValueError as e:
      raise config.ConfigError(str(e)) from None
    if extra := [n for n in flagged.given if n not in WITH_POINT]:
      raise config.ConfigError(f"--{extra[0]} does not apply with --point: the point sets the "
                               "network")
  own = {"fusion": "pallas", "numpy_dtype": "numpy"}  # Flags of one impl of the pair.
  cfgs = []
  for impl in _IMPLS.value:
    given = tuple(n for n in flagged.given if own.get(n, impl) == impl)
    fusion = flagged.fusion if impl == "pallas" else None
    if _POINT.value is not None:
      keep = {n: getattr(flagged, n) for n in given}
      cfg = point.config(impl=impl, **dict(keep, fusion=fusion, given=given))
    else:
      cfg = dataclasses.replace(flagged, impl=impl, fusion=fusion, given=given)
    cfgs.append(config.resolve(cfg))
  return cfgs


def main(argv):
  del argv
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
  seeds = cli.ints("seeds", _SEEDS.value, low=0) if _SEEDS.value else None
  if why := next(filter(None, (config.seed_problem("--seeds", s) for s in seeds or ())), None):
    raise config.ConfigError(why)
  cfgs = configs()
  if _REFERENCE.value == "float64" and any(c.impl == "numpy" for c in cfgs):
    raise config.ConfigError("--reference=float64 compares impls that train in float32 (xla, "
                             "pallas, triton) with NumPy's float64 run: leave numpy out of --impls")
  cli.writable(_OUT.value)
  if _REFERENCE.value == "float64":
    result = float64_distances(cfgs, seeds or [cfgs[0].seed])
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
