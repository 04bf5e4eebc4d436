"""A grid of seeds x learning rates trained as one population: from a config to a result dict.

Every member trains on the same data (for the regression net: the synthetic set drawn from
``cfg.seed``); a member's seed picks its initial weights and its batch order, as ``--seed`` does
for a single run, so member (seed, lr) follows the single run with that seed and lr.

Timing: each chunk of members is compiled ahead of time (``compile_time_s``, summed over
chunks); ``epoch_time_s[e]`` is epoch e of every chunk, each blocked until its losses are on the
host, and ``train_time_s`` their sum.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import jax
import numpy as np

from jaxshallow import compile_cache, models, paths, population as pop
from jaxshallow.devices import placement
from jaxshallow.run.config import Config, ConfigError, resolve
from jaxshallow.run.runner import device_info, load_data, triton_notice
from jaxshallow.run.trainers import init_params


def members(seeds, lrs) -> list[tuple[int, float]]:
  """The grid as (seed, lr) pairs, learning rate major."""
  return [(int(s), float(lr)) for lr in lrs for s in seeds]


def _population_cfg(cfg: Config, per_device: int = paths.STEP_KERNELS_FROM) -> Config:
  """``cfg`` as the population trains it, ``per_device`` members a device at a time: resolved,
  and for pallas with the path ``paths.population`` picks. Nothing numpy can do."""
  if cfg.impl not in ("xla", "pallas"):
    raise ConfigError("a population needs --impl=xla or pallas (the numpy reference trains one "
                      "network at a time; the triton impl's kernels are not batched)")
  cfg = resolve(cfg)
  if cfg.data_parallel:
    raise ConfigError("a population spreads its members over the devices; --data_parallel "
                      "splits the batch of one network")
  if cfg.dispatch != "scan":
    raise ConfigError("a population trains each epoch as one compiled program (--dispatch=scan)")
  if cfg.impl != "pallas":
    return cfg
  return dataclasses.replace(cfg, fusion=paths.population(cfg, per_device).fusion)


def run(cfg: Config, seeds, lrs, *, chunk: int = 0, log: Callable[[str], None] = print) -> dict:
  """Train every (seed, lr) of the grid; ``cfg.devices`` (0: all) share each chunk of ``chunk``
  members (0: the whole grid at once). Returns the result dict that ``--out`` writes."""
  compile_cache.enable(cfg.compilation_cache)  # XLA's cache; a sharded epoch is not exported.
  grid = members(seeds, lrs)
  the_mesh = placement.mesh(placement.pick_devices(cfg.devices), pop.AXIS)
  n_dev = the_mesh.size
  chunk = min(chunk or len(grid), len(grid))
  chunk = -(-chunk // n_dev) * n_dev  # Whole members per device (a last chunk is padded).
  cfg = _population_cfg(cfg, per_device=chunk // n_dev)  # What each device trains at once
  if note := triton_notice(cfg):
    log(note)
  ds = load_data(cfg)
  model = models.BY_NAME[cfg.model]
  static = dict(impl=paths.ops_impl(cfg), precision=cfg.precision, model=model,
                blocks=cfg.blocks)
  data = {"train": placement.replicate((ds.train_images, ds.train_labels), the_mesh),
          "test": placement.replicate((ds.test_images, ds.test_labels), the_mesh)}
  n = len(ds.train_labels)
  result = {**dataclasses.asdict(cfg), "hidden": list(cfg.hidden), **device_info(cfg.impl),
            "devices": n_dev, "members_per_program": chunk, "n_train": n,
            "n_test": len(ds.test_labels), "evaluated_on": "holdout" if cfg.holdout else "test",
            "compile_time_s": 0.0, "epoch_time_s": [0.0] * cfg.epochs}
  records = []
  for first in range(0, len(grid), chunk):
    part = grid[first:first + chunk]
    padded = part + [part[-1]] * (chunk - len(part))  # Repeats, dropped from the results.
    label = f"members {first + 1}-{first + len(part)} of {len(grid)}"
    rec, compile_s, epoch_s = _train_chunk(cfg, ds, data, padded, the_mesh, static, label, log)
    records += rec[:len(part)]
    result["compile_time_s"] += compile_s
    result["epoch_time_s"] = [a + b for a, b in zip(result["epoch_time_s"], epoch_s)]
  result["train_time_s"] = sum(result["epoch_time_s"])
  result["members"] = records
  result["summary"] = summarize(records, lrs)
  result["networks_per_second"] = len(grid) / result["train_time_s"]
  return result


def _train_chunk(cfg, ds, data, grid, the_mesh, static, label, log):
  seeds = [s for s, _ in grid]
  params = pop.init_params(lambda key: init_params(cfg, ds, key), seeds)
  params = placement.shard(jax.tree.map(np.asarray, params), the_mesh)
  opt_state = pop.init_opt_state(cfg.optimizer, params, cfg.momentum)
  lrs = placement.shard(np.asarray([lr for _, lr in grid], np.float32), the_mesh)
  n = len(ds.train_labels)
  # On one device, members that share a seed share its order (member i on order i mod U), which
  # softmax regression's one-CTA kernel gathers once; split over devices, each member its own.
  period = pop.order_period(seeds) if the_mesh.size == 1 else len(seeds)
  orders = [placement.shard(pop.epoch_orders(seeds[:period], e, n), the_mesh)
            for e in range(cfg.epochs)]
  kw = dict(optimizer=cfg.optimizer, momentum=cfg.momentum, batch_size=cfg.batch_size,
            fusion=cfg.fusion or "ops", **static)
  t0 = time.perf_counter()
  fn = pop.sharded_epoch(the_mesh, **kw).lower(params, opt_state, *data["train"], orders[0],
                                               lrs).compile()
  compile_s = time.perf_counter() - t0
  losses, epoch_s = [], []
  for e in range(cfg.epochs):
    t0 = time.perf_counter()
    params, opt_state, metrics = fn(params, opt_state, *data["train"], orders[e], lrs)
    loss = placement.gather(metrics["loss"])  # On the host: the epoch is done.
    epoch_s.append(time.perf_counter() - t0)
    losses.append(loss)
    ok = np.isfinite(loss)
    log(f"{label}  epoch {e + 1:3d}/{cfg.epochs}  loss mean "
        f"{np.mean(loss[ok]) if ok.any() else math.nan:.5f}  ({int((~ok).sum())} diverged)  "
        f"time {epoch_s[-1]:.3f}s")
  losses = np.stack(losses, axis=1)  # (members, epochs)
  evaluation = {**static, "impl": paths.eval_impl(cfg)}
  test = pop.evaluate(params, *data["test"], the_mesh=the_mesh, **evaluation)
  train = (pop.evaluate(params, *data["train"], the_mesh=the_mesh, **evaluation)
           if cfg.model == "regression" else None)
  records = []
  for i, (seed, lr) in enumerate(grid):
    rec = {"seed": seed, "lr": lr, "epoch_loss": losses[i].tolist()}
    bad = np.flatnonzero(~np.isfinite(losses[i]))
    rec["diverged"] = bool(bad.size)
    if bad.size:
      rec["diverged_epoch"] = int(bad[0]) + 1
    elif cfg.model == "regression":
      rec.update(final_mse=float(train["loss"][i]), test_mse=float(test["loss"][i]))
    else:
      rec.update(test_loss=float(test["loss"][i]), test_accuracy=float(test["accuracy"][i]))
    records.append(rec)
  return records, compile_s, epoch_s


def score(rec: dict):
  """A member's score (holdout or test accuracy; final MSE for regression), None if diverged."""
  if rec["diverged"]:
    return None
  return rec.get("test_accuracy", rec.get("final_mse"))


def summarize(records, lrs) -> list[dict]:
  """Per learning rate: mean, standard deviation, min and max of the scores of the members that
  did not diverge, and how many diverged."""
  out = []
  for lr in map(float, lrs):
    scores = [score(r) for r in records if r["lr"] == lr]
    ok = [s for s in scores if s is not None]
    row = {"lr": lr, "members": len(scores), "diverged": len(scores) - len(ok)}
    if ok:
      row.update(mean=float(np.mean(ok)), std=float(np.std(ok)), min=float(min(ok)),
                 max=float(max(ok)))
    out.append(row)
  return out
