"""experiments.mnist end to end, as a user runs it."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import forkrun
from conftest import ROOT

REQUIRED = ["impl", "model", "dataset", "epochs", "batch_size", "lr", "seed", "device",
            "jax_version", "compile_time_s", "train_time_s", "epoch_time_s", "epoch_loss",
            "test_loss", "test_accuracy"]


@pytest.fixture(scope="module", autouse=True)
def server():
  """The scripts run through a forking server (``forkrun``): each command a process of its own,
  without importing jax again."""
  global SERVER
  with forkrun.Server({**os.environ, "PYTHONPATH": str(ROOT)}, ROOT) as SERVER:
    yield SERVER


def run_cli(*args, env=None, script="experiments.mnist"):
  """``python -m script *args`` with ``env`` added: its exit code, stdout and stderr."""
  code, out, err = SERVER.run(script, args, env or {})
  return subprocess.CompletedProcess([script, *args], code, out, err)


@pytest.mark.parametrize("impl", ["xla", "numpy"])
def test_short_run_writes_results(real_data_dir, tmp_path, impl):
  out = tmp_path / "sub" / "r.json"
  p = run_cli(f"--impl={impl}", "--epochs=2", "--train_limit=2000", "--test_limit=500",
              "--hidden=64,32", f"--out={out}")
  assert p.returncode == 0, p.stderr
  assert p.stdout.count("epoch ") == 2 and "test accuracy" in p.stdout
  r = json.loads(out.read_text())
  assert all(k in r for k in REQUIRED), [k for k in REQUIRED if k not in r]
  assert r["impl"] == impl and r["hidden"] == [64, 32] and r["n_train"] == 2000
  assert len(r["epoch_time_s"]) == len(r["epoch_loss"]) == 2
  assert r["epoch_loss"][1] < r["epoch_loss"][0]
  assert 0.5 < r["test_accuracy"] <= 1.0  # 2 epochs on 2,000 images: far above chance.
  assert r["train_time_s"] == pytest.approx(sum(r["epoch_time_s"]))


BAD = [
    (["--lr=-1"], "lr must be a positive number"),
    (["--batch_size=0"], "batch_size must be at least 1"),
    (["--batch_size=5000", "--train_limit=1000"], "larger than the training set"),
    (["--impl=cuda"], "unknown impl"),
    (["--dataset=cifar"], "unknown dataset"),
    (["--hidden=256,x"], "hidden must be comma-separated integers"),
    (["--optimizer=lbfgs"], "unknown optimizer"),
    (["--optimizer=adam"], "no default learning rate for the mlp with --optimizer=adam"),
    (["--epochs=0"], "epochs must be at least 1"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_flags_fail_with_one_line(real_data_dir, args, message):
  p = run_cli(*args, "--train_limit=1000")
  assert p.returncode != 0
  assert "Traceback" not in p.stderr
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and message in lines[0], p.stderr


def test_missing_data_without_network(tmp_path):
  env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "JAXSHALLOW_DATA_DIR": str(tmp_path / "none"),
         "JAXSHALLOW_MIRRORS": "http://127.0.0.1:9/"}
  (tmp_path / "empty").mkdir()
  p = run_cli(f"--data_dir={tmp_path / 'empty'}", env=env)
  assert p.returncode != 0 and "Traceback" not in p.stderr
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "not found" in lines[0] and "--data_dir" in lines[0], p.stderr


def test_data_dir_that_does_not_exist_is_an_error(real_data_dir, tmp_path):
  """Not silently replaced by $JAXSHALLOW_DATA_DIR, which holds the data here."""
  p = run_cli(f"--data_dir={tmp_path / 'nonexistent'}", "--train_limit=640")
  assert p.returncode != 0 and "Traceback" not in p.stderr
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "nonexistent does not exist" in lines[0], p.stderr


@pytest.mark.parametrize("script,args", [
    ("experiments.mnist", ["--lr=1e6", "--train_limit=640", "--test_limit=100", "--epochs=3"]),
    ("experiments.regression", ["--lr=1e3", "--size=medium", "--epochs=3", "--hidden=32"])])
def test_divergence_is_reported_not_hidden(real_data_dir, tmp_path, script, args):
  out = tmp_path / "r.json"
  p = run_cli(*args, f"--out={out}", script=script)
  assert p.returncode != 0 and "Traceback" not in p.stderr
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "training diverged in epoch 1" in lines[0], p.stderr
  assert "smaller --lr" in lines[0] and "test accuracy" not in p.stdout
  r = json.loads(out.read_text())  # Written all the same.
  assert r["diverged"] is True and r["diverged_epoch"] == 1
  assert len(r["epoch_loss"]) == 1 and "test_accuracy" not in r and "final_mse" not in r


def test_pallas_cli_runs_interpreted(real_data_dir, tmp_path):
  out = tmp_path / "p.json"
  p = run_cli("--impl=pallas", "--epochs=1", "--train_limit=640", "--test_limit=200",
              f"--out={out}")
  assert p.returncode == 0, p.stderr
  assert "interpret mode" in p.stderr  # The one-line notice that no GPU was found.
  assert json.loads(out.read_text())["impl"] == "pallas"


def test_parity_lockstep_xla_pallas(real_data_dir, tmp_path):
  """--fusion picks the Pallas kernels; xla, the reference, runs as it is."""
  out = tmp_path / "parity.json"
  p = run_cli("--impls=xla,pallas", "--fusion=ops", "--epochs=2", "--train_limit=1280",
              "--hidden=64", f"--out={out}", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  r = json.loads(out.read_text())
  assert len(r["epochs"]) == 2 and r["worst_lockstep_rel"] < 1e-3
  assert all(e["lockstep"] > 0 for e in r["epochs"])


def test_parity_against_float64_at_a_grid_point(real_data_dir, tmp_path):
  """--reference=float64: each epoch both impls start from the NumPy float64 run's state; the
  distances are reported per seed and epoch, and pallas passes within twice xla's."""
  out = tmp_path / "parity.json"
  p = run_cli("--reference=float64", "--point=mlp momentum", "--seeds=0,1", "--epochs=2",
              "--train_limit=640", f"--out={out}", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  r = json.loads(out.read_text())
  assert [(row["seed"], row["epoch"]) for row in r["rows"]] == [(0, 1), (0, 2), (1, 1), (1, 2)]
  assert r["passed"] and all(0 <= row["d_ref"] < 1e-4 for row in r["rows"])
  assert all(0 <= row["d_new"] <= 2 * row["d_ref"] + 1e-6 * row["float64"] for row in r["rows"])


def test_parity_of_several_points_writes_a_table_and_merges(tmp_path):
  """--point=a,b --out_dir: the float64 check at each (the regression net's synthetic data),
  PARITY.md and parity.json written after each point; --merge joins two runs' tables, the later
  run's point replacing the earlier one's, in the grid's order."""
  common = ["--reference=float64", "--seeds=0", "--epochs=1"]
  p = run_cli(*common, "--point=regression medium,regression small",
              f"--out_dir={tmp_path}/a", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  a = json.loads((tmp_path / "a" / "parity.json").read_text())
  assert [q["point"] for q in a["points"]] == ["regression medium", "regression small"]
  assert all(q["passed"] and q["seeds"] == [0] and q["epochs"] == 1 for q in a["points"])
  assert "2 of 2 points passed" in (tmp_path / "a" / "PARITY.md").read_text()
  p = run_cli(*common, "--point=regression small", f"--out_dir={tmp_path}/b",
              script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  p = run_cli(f"--merge={tmp_path}/a/parity.json,{tmp_path}/b/parity.json",
              f"--out_dir={tmp_path}/m", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  m = json.loads((tmp_path / "m" / "parity.json").read_text())
  b = json.loads((tmp_path / "b" / "parity.json").read_text())
  assert [q["point"] for q in m["points"]] == ["regression small", "regression medium"]
  assert m["points"][0] == b["points"][0]
  table = (tmp_path / "m" / "PARITY.md").read_text()
  assert table.count("| regression ") == 2 and "--merge=<2 runs>" in table


def test_parity_float64_runs_kept_and_read_back(tmp_path):
  """--float64_only trains the float64 runs alone and keeps them in --float64_cache (a CPU's
  work); a later check reads them back instead of training them, with the same distances as a
  run without the cache."""
  common = ["--reference=float64", "--point=regression small", "--seeds=0,1", "--epochs=2"]
  cache = tmp_path / "cache"
  p = run_cli(*common, f"--float64_cache={cache}", "--float64_only", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  assert len(list(cache.glob("float64_*.npz"))) == 2 and "kept in" in p.stdout
  runs = {}
  for name, extra in (("cached", [f"--float64_cache={cache}"]), ("fresh", [])):
    out = tmp_path / f"{name}.json"
    p = run_cli(*common, *extra, f"--out={out}", script="experiments.parity")
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("the float64 run from" in p.stdout) == (name == "cached")
    runs[name] = json.loads(out.read_text())["rows"]
  assert runs["cached"] == runs["fresh"]


def test_parity_refuses_an_unknown_point():
  p = run_cli("--reference=float64", "--point=nope", script="experiments.parity")
  assert p.returncode != 0 and "unknown grid points 'nope'" in p.stderr
  assert "Traceback" not in p.stderr


def test_parity_of_the_regression_net(tmp_path):
  """The regression net has no accuracy: parity reports its final training MSE instead."""
  out = tmp_path / "parity.json"
  p = run_cli("--model=regression", "--dataset=small", "--impls=xla,numpy", "--epochs=2",
              "--hidden=16", f"--out={out}", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  assert "final mse xla" in p.stdout
  r = json.loads(out.read_text())
  assert set(r["final_mse"]) == {"xla", "numpy"} and r["worst_lockstep_rel"] < 1e-5


def test_parity_lockstep_carries_the_optimizer_state(real_data_dir, tmp_path):
  """The cnn trains with momentum by default: lockstep hands over the velocities too, here from
  xla to the hand-written NumPy optimizer, so the second epoch agrees as closely as the first."""
  out = tmp_path / "parity.json"
  p = run_cli("--model=cnn", "--impls=xla,numpy", "--epochs=2", "--train_limit=192",
              "--test_limit=100", f"--out={out}", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  r = json.loads(out.read_text())
  assert [e["lock_rel"] < 1e-5 for e in r["epochs"]] == [True, True], r["epochs"]


@pytest.mark.parametrize("model", ["cnn", "logreg"])
def test_three_impls_agree_on_first_epoch(real_data_dir, tmp_path, model):
  """numpy, xla and pallas (interpreted) from the same start: first-epoch losses within 1e-3."""
  losses = {}
  for impl in ("numpy", "xla", "pallas"):
    out = tmp_path / f"{impl}.json"
    p = run_cli(f"--impl={impl}", f"--model={model}", "--epochs=1", "--train_limit=192",
                "--test_limit=100", f"--out={out}")
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["model"] == model and r["hidden"] == [] and r["steps_per_epoch"] == 3
    assert (r["optimizer"], r["lr"]) == (("momentum", 0.02) if model == "cnn" else ("sgd", 0.25))
    losses[impl] = r["epoch_loss"][0]
  assert abs(losses["numpy"] / losses["xla"] - 1) < 1e-3, losses
  assert abs(losses["pallas"] / losses["xla"] - 1) < 1e-3, losses


def test_regression_three_impls(tmp_path):
  results = {}
  for impl in ("numpy", "xla", "pallas"):
    out = tmp_path / f"{impl}.json"
    p = run_cli(f"--impl={impl}", "--size=medium", "--epochs=2", "--hidden=64,32",
                f"--out={out}", script="experiments.regression")
    assert p.returncode == 0, p.stderr
    results[impl] = json.loads(out.read_text())
  xla = results["xla"]
  assert xla["n_train"] == 2560 and xla["batch_size"] == 256 and xla["lr"] == 0.002
  assert xla["bias"] is False and "test_accuracy" not in xla
  for impl in ("numpy", "pallas"):
    assert abs(results[impl]["final_mse"] / xla["final_mse"] - 1) < 1e-3
    for a, b in zip(results[impl]["epoch_loss"], xla["epoch_loss"]):
      assert abs(a / b - 1) < 1e-3


def test_regression_data_is_reproducible():
  from jaxshallow import synthetic
  a, b, c = synthetic.load("small", 3), synthetic.load("small", 3), synthetic.load("small", 4)
  np.testing.assert_array_equal(a.train_images, b.train_images)
  assert a.train_images.shape == (256, 32) and a.test_images.shape == (2560, 32)
  assert np.abs(a.train_images).max() <= 1 and not np.array_equal(a.train_labels, c.train_labels)
  # y = sum(x^2) + N(0, 0.1^2): the residual has the noise's spread.
  resid = a.test_labels - (a.test_images ** 2).sum(1)
  assert abs(resid.std() - 0.1) < 0.01


def test_regression_bad_size_is_one_line():
  p = run_cli("--size=huge", script="experiments.regression")
  assert p.returncode != 0 and "Traceback" not in p.stderr
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "unknown dataset 'huge'" in lines[0], p.stderr


def test_sync_every_gives_the_same_losses(real_data_dir, tmp_path):
  """Fetching the loss every 3 epochs instead of every epoch, or waiting for each epoch before
  dispatching the next, changes timing, not training."""
  results = []
  for extra in ([], ["--sync_every=3"], ["--dispatch=loop", "--sync_every=2"], ["--nooverlap"],
                ["--sync_every=3", "--nooverlap"]):
    out = tmp_path / f"r{len(results)}.json"
    p = run_cli("--epochs=4", "--train_limit=1280", "--test_limit=200", "--hidden=32",
                f"--out={out}", *extra)
    assert p.returncode == 0, p.stderr
    results.append(json.loads(out.read_text()))
  for r in results[1:]:
    assert len(r["epoch_time_s"]) == 4 and all(t > 0 for t in r["epoch_time_s"])
    assert r["epoch_loss"] == pytest.approx(results[0]["epoch_loss"], rel=1e-6)
  # Within a group of 3 epochs only the group is timed: its epochs share the mean.
  assert results[1]["epoch_time_s"][0] == results[1]["epoch_time_s"][2]


def test_sweep_scores_on_a_holdout_of_the_training_set(real_data_dir):
  p = run_cli("--model=logreg", "--epochs=1", "--train_limit=1200", "--holdout=200",
              "--lrs=0.1,0.3", "--seeds=0,1", script="experiments.sweep")
  assert p.returncode == 0, p.stderr
  lines = p.stdout.splitlines()
  assert lines[0] == "scored by: accuracy on a holdout of 200 training images"
  assert any(l.startswith("4 networks on 1 device(s)") for l in lines), lines
  rows = [l.split() for l in lines if l.startswith("lr ")]
  assert [r[1] for r in rows] == ["0.1", "0.3"]
  scores = [float(v) for r in rows for v in r[2:4]]
  assert all(0.5 < s <= 1.0 for s in scores), lines  # 1,000 images, one epoch: above chance.
  # A member scores as the single run with its seed and lr.
  from jaxshallow.run import config, runner
  single = runner.run(config.Config(model="logreg", epochs=1, train_limit=1200, holdout=200,
                                    lr=0.3, seed=1, data_dir=str(real_data_dir)),
                      log=lambda s: None)
  assert abs(scores[3] - single["test_accuracy"]) <= 1 / 200


def test_holdout_scores_on_training_images_not_the_test_set(real_data_dir):
  from jaxshallow.run import config, runner
  cfg = config.Config(model="logreg", epochs=1, train_limit=1200, holdout=200,
                      data_dir=str(real_data_dir))
  r = runner.run(cfg, log=lambda s: None)
  assert (r["n_train"], r["n_test"], r["evaluated_on"]) == (1000, 200, "holdout")
  with pytest.raises(config.ConfigError, match="leaves no training examples"):
    runner.run(dataclasses.replace(cfg, holdout=1200), log=lambda s: None)


@pytest.mark.skipif(__import__("jax").devices()[0].platform == "gpu",
                    reason="on a GPU the script measures instead")
@pytest.mark.parametrize("script", ["cluster_exchange", "cluster_regression", "warpgroup_costs",
                                    "tile_products"])
def test_cluster_scripts_without_a_hopper_gpu_are_one_line(script):
  p = run_cli(script=f"probes.{script}")
  assert p.returncode != 0 and "Traceback" not in p.stderr
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "needs an NVIDIA Hopper" in lines[0], p.stderr


def test_cluster_regression_reference_matches_xla_in_float64():
  """The float64 trajectory the GPU kernel is checked against is the project's own training."""
  import jax
  import numpy as np
  from jaxshallow import models, train
  from probes import cluster_regression
  w0, w1, xs, ys = cluster_regression.problem(64, 0, 3)
  want_w0, want_w1, want_losses = cluster_regression.reference(w0, w1, xs, ys, 0.002)
  with jax.enable_x64(True):
    params = jax.tree.map(jax.numpy.asarray,
                          [{"w": np.float64(w0)}, {"w": np.float64(w1)[:, None]}])
    tx = train.make_optimizer("sgd", 0.002, 0.0)
    state, losses = tx.init(params), []
    for x, y in zip(np.float64(xs), np.float64(ys)):
      params, state, metrics = train.train_step(params, state, (x, y), tx=tx, impl="xla",
                                                model=models.BY_NAME["regression"])
      losses.append(float(metrics["loss"]))
  np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
  np.testing.assert_allclose(params[0]["w"], want_w0, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(params[1]["w"][:, 0], want_w1, rtol=1e-10, atol=1e-12)


class _Recorder:
  """A trainer stand-in: records when each epoch is dispatched and when its loss is read."""

  def __init__(self, losses, asynchronous=True):
    self.losses, self.events, self.asynchronous = losses, [], asynchronous

  def start_epoch(self, e):
    self.events.append(f"start {e}")
    recorder = self

    class Loss:
      def __float__(self):
        recorder.events.append(f"read {e}")
        return recorder.losses[e]
    return Loss()


@pytest.mark.parametrize("overlap,sync_every,want", [
    (True, 1, ["start 0", "start 1", "start 2", "read 0", "start 3", "read 1", "read 2",
               "read 3"]),
    (False, 1, ["start 0", "read 0", "start 1", "read 1", "start 2", "read 2", "start 3",
                "read 3"]),
    (True, 3, ["start 0", "start 1", "start 2", "start 3", "read 0", "read 1", "read 2",
               "read 3"]),
])
def test_timed_epochs_dispatches_ahead_only_with_overlap(overlap, sync_every, want):
  """With overlap the host keeps two groups dispatched beyond the one it waits for."""
  from jaxshallow.run import runner
  assert runner.AHEAD == 2
  trainer = _Recorder([3.0, 2.0, 1.0, 0.5])
  times, losses = runner.timed_epochs(trainer, 4, sync_every, overlap)
  assert trainer.events == want and losses == [3.0, 2.0, 1.0, 0.5] and len(times) == 4


def test_timed_epochs_stops_at_a_diverged_group():
  """The losses end at the first non-finite one; with overlap the next epochs had started."""
  from jaxshallow.run import runner
  trainer = _Recorder([3.0, float("nan"), 1.0, 0.5, 0.25])
  _, losses = runner.timed_epochs(trainer, 5, 1, True)
  assert losses[0] == 3.0 and np.isnan(losses[1]) and len(losses) == 2
  assert trainer.events == ["start 0", "start 1", "start 2", "read 0", "start 3", "read 1"]


def test_timed_epochs_stops_mid_call():
  """A call's losses come back together; those after the first non-finite one are not
  reported, nor the later calls'."""
  from jaxshallow.run import runner

  class Calls:
    asynchronous, epochs_per_call = True, 3

    def start_epochs(self, epochs):
      return [np.array([3.0, float("inf"), 1.0][:len(epochs)]) if epochs.start == 0
              else np.ones(len(epochs))]
  times, losses = runner.timed_epochs(Calls(), 7, 1, True)
  assert losses[0] == 3.0 and np.isinf(losses[1]) and len(losses) == len(times) == 2


def test_timed_epochs_never_overlaps_a_synchronous_trainer():
  """A trainer that runs the epoch inside start_epoch (NumPy) would otherwise have each epoch
  timed with the next one's work."""
  from jaxshallow.run import runner
  trainer = _Recorder([3.0, 2.0], asynchronous=False)
  runner.timed_epochs(trainer, 2, 1, True)
  assert trainer.events == ["start 0", "read 0", "start 1", "read 1"]


def test_out_of_device_memory_is_one_line(monkeypatch, capsys):
  """An allocation the device refuses (a network far too wide) ends in one line; any other
  exception still raises."""
  from jaxshallow.run import cli
  monkeypatch.setattr(sys, "argv", ["script"])

  def too_big(argv):
    raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 80040008000 bytes.\nmore")
  with pytest.raises(SystemExit, match=r"^error: out of memory on .*: RESOURCE_EXHAUSTED: Out "
                     r"of memory allocating 80040008000 bytes\. \(a smaller network"):
    cli.run(too_big)

  def other(argv):
    raise RuntimeError("something else")
  with pytest.raises(RuntimeError, match="something else"):
    cli.run(other)


def test_a_replaced_result_file_is_said(tmp_path):
  """--out over an earlier result: written, and the line says it replaced the file there."""
  from jaxshallow.run import config, runner
  out = tmp_path / "r.json"
  out.write_text("{}")
  lines = []
  cfg = config.Config(impl="xla", model="regression", dataset="small", epochs=1)
  runner.run(cfg, log=lines.append, out=str(out))
  assert lines[-1] == f"wrote {out} (it replaced the file there)"
  assert json.loads(out.read_text())["epochs"] == 1
