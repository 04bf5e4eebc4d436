"""experiments.mnist end to end, as a user runs it."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

REQUIRED = ["impl", "model", "dataset", "epochs", "batch_size", "lr", "seed", "device",
            "jax_version", "compile_time_s", "train_time_s", "epoch_time_s", "epoch_loss",
            "test_loss", "test_accuracy"]


def run_cli(*args, env=None, script="experiments.mnist"):
  env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
  return subprocess.run([sys.executable, "-m", script, *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)


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
  p = run_cli(f"--data_dir={tmp_path / 'nothing'}", env=env)
  assert p.returncode != 0 and "Traceback" not in p.stderr
  lines = [l for l in p.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and "not found" in lines[0] and "--data_dir" in lines[0], p.stderr


def test_pallas_cli_runs_interpreted(real_data_dir, tmp_path):
  out = tmp_path / "p.json"
  p = run_cli("--impl=pallas", "--epochs=1", "--train_limit=640", "--test_limit=200",
              f"--out={out}")
  assert p.returncode == 0, p.stderr
  assert "interpret mode" in p.stderr  # The one-line notice that no GPU was found.
  assert json.loads(out.read_text())["impl"] == "pallas"


def test_parity_lockstep_xla_pallas(real_data_dir, tmp_path):
  out = tmp_path / "parity.json"
  p = run_cli("--impls=xla,pallas", "--epochs=2", "--train_limit=1280", "--hidden=64",
              f"--out={out}", script="experiments.parity")
  assert p.returncode == 0, p.stdout + p.stderr
  r = json.loads(out.read_text())
  assert len(r["epochs"]) == 2 and r["worst_lockstep_rel"] < 1e-3
  assert all(e["lockstep"] > 0 for e in r["epochs"])
