"""benchmarks.bench --quick on the CPU: the tables' structure, and every number finite and > 0."""

import csv
import json
import math
import os
import subprocess
import sys

import pytest

from conftest import ROOT

GROUPS = ["workloads", "techniques", "batch", "blocks"]


def numbers_in_table(md: str, title: str):
  section = md.split(f"## {title}")[1].split("\n## ")[0]
  rows = [l for l in section.splitlines() if l.startswith("| ")]
  header, body = rows[0], rows[1:]
  assert body, f"no rows under {title}"
  for row in body:
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == header.count("|") - 1
    for cell in cells[3:]:  # After workload, impl and variant: numbers or "–".
      if cell != "–":
        v = float(cell.replace(",", ""))
        assert math.isfinite(v) and v > 0, (row, cell)
  return body


# The whole quick bench (about 2 minutes of one worker): CI's suite on the oldest jax leaves it
# to the newest (.ci/run sets JAXSHALLOW_CI_SUITE), to stay within CI's 30 minutes.
@pytest.mark.skipif(os.environ.get("JAXSHALLOW_CI_SUITE") == "oldest",
                    reason="CI runs the quick bench on the newest jax only")
def test_bench_quick(real_data_dir, tmp_path):
  out = tmp_path / "bench"
  env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
  p = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--quick", f"--out_dir={out}"],
                     cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
  md = (out / "RESULTS.md").read_text()
  for title in ["Workloads (reference configurations)", "Techniques, on the MLP",
                "MLP batch size", "Pallas block sizes, on the MLP"]:
    numbers_in_table(md, title)
  assert "cnn momentum 0.9, lr 0.02, batch 64, 1 epochs" in md  # What each workload trained with.
  results = json.loads((out / "results.json").read_text())
  rows = results["results"]
  assert {r["group"] for r in rows} == set(GROUPS)
  assert {r["workload"] for r in rows if r["group"] == "workloads"} == {
      "mlp", "cnn", "logreg", "regression"}
  for w in ("mlp", "cnn", "logreg", "regression"):
    assert {"numpy", "xla", "pallas"} <= {r["impl"] for r in rows if r["workload"] == w}
  assert len([r for r in rows if r["group"] == "techniques"]) == 18  # 9 switches x 2 impls.
  for r in rows:
    assert r["train_time_s"] > 0 and r["samples_per_s"] > 0
    assert len(r["epoch_times"]) == len(r["epoch_losses"]) == r["epochs"]
    score = r.get("test_accuracy", r.get("final_mse"))
    assert score is not None and math.isfinite(score) and score > 0
  with open(out / "results.csv") as f:
    assert len(list(csv.DictReader(f))) == len(rows)
  assert results["meta"]["jax"] and results["meta"]["device"]


# Three points in two processes (--jobs=2): the MLP family's grid epoch kernel with Adam's
# state, softmax regression, a deeper regression net. Every point, each kernel path the CPU takes
# among them, runs in CI after the suite: `benchmarks.bench --grid --quick --jobs=2` (.ci/run).
QUICK_POINTS = ["mlp adam", "softmax regression", "regression hidden 256-256"]


def test_grid_quick(real_data_dir, tmp_path):
  """benchmarks.bench --grid --quick --jobs=2 at QUICK_POINTS: xla beside pallas, in the table
  and the JSON in the points' order, with finite times, a path and a score (two seeds for the
  accuracy's mean), and the note that the processes shared the machine."""
  out = tmp_path / "grid"
  env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
  p = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--grid", "--quick", "--jobs=2",
                      "--seeds=0,1", "--plots=false", f"--points={','.join(QUICK_POINTS)}",
                      f"--out_dir={out}"],
                     cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
  grid_json = json.loads((out / "grid.json").read_text())
  rows = grid_json["rows"]
  assert [r["point"] for r in rows] == QUICK_POINTS
  assert [r["variant"] for r in grid_json["results"]] == [n for n in QUICK_POINTS for _ in "xp"]
  for r in rows:
    assert math.isfinite(r["speedup"]) and r["speedup"] > 0 and r["path"] in CPU_PATHS, r
    assert r["seeds"] == 2 and r["xla_score"] is not None and r["pallas_score"] is not None, r
  md = (out / "GRID.md").read_text()
  assert len([l for l in md.splitlines() if l.startswith("| ")]) == len(QUICK_POINTS) + 1
  assert "geometric mean" in md and "2 processes at once (--jobs)" in md
  assert "no GPU" in md  # The processes' own notes kept (the suite runs on the CPU).
  assert sorted(p.name for p in out.iterdir()) == ["GRID.md", "grid.json"]  # Nothing more


CPU_PATHS = {"op kernels", "step kernels", "epoch kernel (grid)"}


def test_every_grid_point_has_a_quick_form_and_a_path():
  """Every point of the grid (not only QUICK_POINTS) resolves, for xla and pallas, to a valid
  tiny configuration with the point's own changes, and its quick form to a Pallas path the CPU
  runs (the GPU's paths are chosen at full widths: the grid's own runs show those)."""
  from benchmarks import grid
  from jaxshallow import paths
  assert len(set(p.name for p in grid.GRID)) == len(grid.GRID) == 32
  for point in grid.GRID:
    for impl in ("xla", "pallas"):
      cfg = paths.resolve(grid.config_of(point, impl, quick=True))
      assert cfg.impl == impl and cfg.epochs == 1, (point.name, cfg)
      for field, value in point.settings:
        if field not in ("hidden", "dataset"):  # (the quick form cuts widths and data sets)
          assert getattr(cfg, field) == value, (point.name, field)
      if impl == "pallas":
        assert paths.describe(cfg) in CPU_PATHS, (point.name, paths.describe(cfg))


def test_grid_points_refuse_unknown_names():
  import pytest
  from benchmarks import grid
  with pytest.raises(ValueError, match="unknown grid points 'nope'"):
    grid.points(["nope"])
  assert [p.name for p in grid.points(["cnn adam"])] == ["cnn adam"]


def test_bench_without_torch(real_data_dir, tmp_path):
  """Where torch is missing, the peer is skipped with a notice and the rest still runs."""
  out = tmp_path / "bench"
  env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
  code = ("import sys, runpy; sys.modules['torch'] = None; "  # import torch now fails
          f"sys.argv = ['bench', '--quick', '--workloads=logreg', '--out_dir={out}']; "
          "runpy.run_module('benchmarks.bench', run_name='__main__')")
  p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                     text=True, timeout=600)
  assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
  assert "PyTorch peer skipped" in p.stderr
  md = (out / "RESULTS.md").read_text()
  assert "PyTorch peer skipped" in md
  rows = numbers_in_table(md, "Workloads (reference configurations)")
  assert {r.split("|")[2].strip() for r in rows} == {"numpy", "xla", "pallas"}


def test_bench_marks_a_diverged_run(real_data_dir):
  """A configuration whose loss becomes NaN is a row that says "diverged", never an accuracy."""
  from benchmarks import bench
  from jaxshallow.run import config
  cfg = config.resolve(config.Config(model="mlp", lr=1e6, epochs=2,
                                     train_limit=640, test_limit=100,
                                     data_dir=str(real_data_dir)))
  r = bench.measure(bench.Case("workloads", "mlp", "xla", "reference", cfg, 1))
  assert r["diverged"] and "test_accuracy" not in r
  assert not math.isfinite(r["epoch_losses"][-1])
  bench.add_speedups([r])
  assert "| diverged |" in bench.table([r], "workloads")


def test_grid_rows_leave_out_the_default_path_among_the_others():
  """Merged runs: a path that an earlier run timed as another path, and that is the point's
  default in a later run, is not shown as one of its other paths."""
  from benchmarks import bench
  run = lambda group, impl, path, t: dict(group=group, variant="p", impl=impl, path=path,
                                          workload="mlp", epochs=1, epoch_time_s=t,
                                          train_time_s=t, compile_time_s=0.0)
  earlier = [run("grid", "xla", "xla", 1.0), run("grid", "pallas", "xla", 1.0),
             run("grid-alt", "pallas", "kernel", 2.0), run("grid-alt", "pallas", "ops", 4.0)]
  later = [run("grid", "xla", "xla", 1.0), run("grid", "pallas", "kernel", 0.5)]
  (row,) = bench.grid_rows(earlier + later)
  assert row["path"] == "kernel" and row["speedup"] == 2.0
  assert row["alternatives"] == {"ops": 0.25}


def test_rows_know_their_precision():
  """Speedups pair each row with the PyTorch peer at its precision, read from the variant."""
  from benchmarks import bench
  rows = {"reference": "float32", "tf32": "tf32", "batch 1024": "float32",
          "batch 1024, tf32": "tf32", "batch 8192, bfloat16": "bfloat16",
          "loss synced every 5 epochs": "float32"}
  for variant, precision in rows.items():
    assert bench._precision({"variant": variant}) == precision


def test_technique_names_pick_switches(tmp_path):
  """--technique_names keeps only the switches named; a name that is not one fails in one line."""
  from absl import flags
  from benchmarks import bench
  flags.FLAGS(["bench", "--workloads=mlp", "--impls=xla,pallas", "--batch_sizes=",
               "--block_sweep=", "--technique_names=tf32,bfloat16"])
  try:
    cases = [c for c in bench.build_cases(["xla", "pallas"]) if c.group == "techniques"]
    assert sorted((c.impl, c.variant) for c in cases) == [
        ("pallas", "bfloat16"), ("pallas", "tf32"), ("xla", "bfloat16"), ("xla", "tf32")]
  finally:
    flags.FLAGS.unparse_flags()
  env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
  p = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--quick", "--workloads=mlp",
                      "--technique_names=tf33", f"--out_dir={tmp_path}"],
                     cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert p.returncode != 0
  assert p.stderr.strip().splitlines()[-1] == (
      "error: unknown --technique_names tf33; the techniques are: loop dispatch; loop + loss "
      "synced every step; loss synced every 5 epochs; host waits for each epoch; streamed from "
      "host, prefetched; no donation; scan unrolled x4; tf32; bfloat16")
  assert "Traceback" not in p.stderr


def test_short_trainings_repeat_until_timed_long_enough(monkeypatch):
  """A training of a few milliseconds is timed more than ``repeats`` times, until its runs add
  up to MIN_TIMED_S or MAX_REPEATS runs; a case of one run (--quick, slow cases) stays one."""
  from benchmarks import bench
  from jaxshallow.run import config
  cfg = config.resolve(config.Config(model="regression", dataset="small", epochs=1))
  monkeypatch.setattr(bench, "MIN_TIMED_S", 1e9)
  monkeypatch.setattr(bench, "MAX_REPEATS", 5)
  assert bench.measure(bench.Case("grid", "regression", "xla", "small", cfg, 3))["repeats"] == 5
  assert bench.measure(bench.Case("grid", "regression", "xla", "small", cfg, 1))["repeats"] == 1
  monkeypatch.setattr(bench, "MIN_TIMED_S", 0.0)
  assert bench.measure(bench.Case("grid", "regression", "xla", "small", cfg, 3))["repeats"] == 3
  # An odd count, so that the median is a run.
  assert bench.measure(bench.Case("grid", "regression", "xla", "small", cfg, 4))["repeats"] == 5


def test_grid_merge_writes_rows_in_the_grids_order(tmp_path):
  """--grid --merge of an H100 run's four quarters, given last first: one table of all 32 points
  in benchmarks.grid's order, the numbers as the runs wrote them."""
  from benchmarks import grid
  run = ROOT / "docs" / "bench" / "2026-12-07h_h100"
  quarters = [run / f"grid_{q}" / "grid.json" for q in (4, 3, 2, 1)]
  p = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--grid", "--plots=false",
                      f"--merge={','.join(map(str, quarters))}", f"--out_dir={tmp_path}"],
                     cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-2000:]
  merged = json.loads((tmp_path / "grid.json").read_text())
  points = list(dict.fromkeys(r["variant"] for r in merged["results"]))  # (xla's and pallas')
  assert points == [r["point"] for r in merged["rows"]] == [point.name for point in grid.GRID]
  speedups = {r["point"]: r["speedup"] for q in quarters
              for r in json.loads(q.read_text())["rows"]}
  assert {r["point"]: r["speedup"] for r in merged["rows"]} == speedups
  assert "| regression hidden 256-1024-256 | 100 |" in (tmp_path / "GRID.md").read_text()


def test_grid_merge_keeps_a_points_later_run_and_unknown_points_last(tmp_path):
  """A point in two runs keeps the later run's numbers (given last); a point the grid does not
  name (an older grid's) comes after the grid's points."""
  run = ROOT / "docs" / "bench" / "2026-12-07h_h100"
  first = json.loads((run / "grid_1" / "grid.json").read_text())
  later = json.loads(json.dumps(first))  # One point again, its pallas run twice as slow
  later["results"] = [dict(r, train_time_s=r["train_time_s"] * (2 if r["impl"] == "pallas"
                                                                else 1))
                      for r in later["results"] if r["variant"] == "mlp batch 128"]
  assert len(later["results"]) == 2
  old = json.loads(json.dumps(first))
  old["results"] = [dict(r, variant="mlp hidden 96") for r in first["results"][:2]]
  files = []
  for name, run_json in (("first", first), ("old", old), ("later", later)):
    (tmp_path / f"{name}.json").write_text(json.dumps(run_json))
    files.append(str(tmp_path / f"{name}.json"))
  p = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--grid", "--plots=false",
                      f"--merge={','.join(files)}", f"--out_dir={tmp_path / 'out'}"],
                     cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-2000:]
  rows = {r["point"]: r for r in json.loads((tmp_path / "out" / "grid.json").read_text())["rows"]}
  assert list(rows)[-1] == "mlp hidden 96"
  before = {r["point"]: r for r in first["rows"]}["mlp batch 128"]["speedup"]
  assert abs(rows["mlp batch 128"]["speedup"] - before / 2) < 0.02 * before

