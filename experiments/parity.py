"""Do two implementations train the same network? Per-epoch losses, free-running and in lockstep.

  python -m experiments.parity --impls=xla,pallas

Free-running: each impl trains on its own from the same initial weights and batch order. Rounding
differences (summation order) grow through training, the more so at a high learning rate, so
free-running losses drift apart even between two runs of one XLA program on different devices.
Lockstep: at the start of every epoch both impls are given the reference impl's parameters and
optimizer state, so each epoch's loss difference measures that epoch's arithmetic alone.

XLA runs with ``--xla_gpu_deterministic_ops=true`` here (unless XLA_FLAGS already sets it).
Without it the xla reference took one float32 trajectory in some processes and another in
others (probably XLA's per-process autotuning), so a lockstep verdict changed from run to run
(H100, MLP, seed 0: the worst epoch 4.9e-4 or 3.8e-3 for the same Triton kernels). With it,
four processes gave the same reference losses and the same lockstep differences.
"""

import os
import sys

if "xla_gpu_deterministic_ops" not in os.environ.get("XLA_FLAGS", ""):  # Before jax starts.
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_gpu_deterministic_ops=true").strip()

from absl import app, flags, logging

from experiments import config_flags
from jaxshallow import data
from jaxshallow.run import config, runner, trainers

_IMPLS = flags.DEFINE_list("impls", ["xla", "pallas"], "Reference impl, then the one to check.")
_TOL = flags.DEFINE_float("tolerance", 1e-3, "Allowed relative difference of lockstep losses.")
_OUT = flags.DEFINE_string("out", None, "Write the comparison as JSON to this file.")


def compare(cfg_ref: config.Config, cfg_new: config.Config, log=print) -> dict:
  ds = runner.load_data(cfg_ref)
  ref, new, lock = (trainers.make_trainer(c, ds) for c in (cfg_ref, cfg_new, cfg_new))
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


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  try:
    if len(_IMPLS.value) != 2:
      raise config.ConfigError(f"--impls takes two impls, got {','.join(_IMPLS.value)}")
    # --fusion picks among the Pallas kernels: the other impl of the pair runs as it is.
    cfgs = [config.resolve(config_flags.config_from_flags(
        impl=i, **({} if i == "pallas" else {"fusion": None}))) for i in _IMPLS.value]
    if _OUT.value:
      runner.check_writable(_OUT.value)
    result = compare(*cfgs)
  except (config.ConfigError, data.DataError) as e:
    sys.exit(f"error: {e}")
  result["tolerance"] = _TOL.value
  if _OUT.value:
    runner.write_json(result, _OUT.value)
  sys.exit(0 if result["worst_lockstep_rel"] <= _TOL.value else 1)


if __name__ == "__main__":
  app.run(main)
