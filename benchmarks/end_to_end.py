"""Time to a trained network: the wall time of a fresh process of the training script, cold and
warm.

  python -m benchmarks.end_to_end                          # mlp, cnn, logreg; xla and pallas
  python -m benchmarks.end_to_end --workloads=mlp --impls=pallas --out_dir=/tmp/e2e

For each workload and impl, ``python -m experiments.mnist --model=W --impl=I`` (the workload's
reference settings) runs several times in a row with an empty compilation cache of its own in a
temporary folder: the first run is cold (everything compiled), the next ``--warm_runs`` warm
(what the cache kept: ``jaxshallow.compile_cache``), of which the median counts (the upper
middle one for an even count). Each row has both wall times, measured here around the
process, beside the compile and train time the script reported. With ``--rounds`` N the whole
set runs N times, the impls' order reversed every other round (so that neither always runs
first, on a host whose file caches the first warms), each round with new empty caches; a row
shows the round of its median cold wall and the run of its median warm wall, and a line a
workload says in how many rounds each impl was at or ahead of the other, cold and warm (one
cold run a row cannot order walls this close: one row's cold walls moved by 1.0-5.4 s between
rounds on one H100, docs/design/time_to_result.md). Writes END_TO_END.md and end_to_end.json
to ``--out_dir``.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile
import time

from absl import flags

from jaxshallow import files
from jaxshallow.run import cli, runner
from jaxshallow.run.config import ConfigError

def one_process(workload: str, impl: str, cache: pathlib.Path, out: pathlib.Path,
                extra=()) -> dict:
  """One run of the training script in a fresh process; its result with ``wall_s`` added."""
  cmd = [sys.executable, "-m", "experiments.mnist", f"--model={workload}", f"--impl={impl}",
         f"--compilation_cache={cache}", f"--out={out}", *extra]
  t0 = time.perf_counter()
  done = subprocess.run(cmd, capture_output=True, text=True)
  wall = time.perf_counter() - t0
  if done.returncode:
    raise ConfigError(f"{' '.join(cmd[1:])} failed: "
                        f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
  result = json.loads(out.read_text())
  return {"wall_s": wall, "compile_time_s": result["compile_time_s"],
          "train_time_s": result["train_time_s"], "path": result["path"],
          "device": result["device"], "jax_version": result["jax_version"],
          "notices": [line for line in done.stderr.splitlines() if "jaxshallow" in line
                      or "compil" in line][-5:]}


def measure(workload: str, impl: str, extra=(), warm_runs: int = 3) -> dict:
  """The cold run of one workload and impl, then ``warm_runs`` warm ones: "warm" is the run of
  the median wall time, "warm_walls" all of them (one warm process varied by up to 1.3 s on
  the H100's host). ``extra``: more script flags."""
  with tempfile.TemporaryDirectory(prefix="jaxshallow-e2e-") as tmp:
    tmp = pathlib.Path(tmp)
    cold = one_process(workload, impl, tmp / "cache", tmp / "cold.json", extra)
    warm = [one_process(workload, impl, tmp / "cache", tmp / f"warm{i}.json", extra)
            for i in range(warm_runs)]
  walls = [w["wall_s"] for w in warm]
  return {"workload": workload, "impl": impl, "cold": cold, "warm": _median(warm),
          "warm_walls": walls, "warm_runs": warm}


def _median(runs: list[dict]) -> dict:
  """The run of the median wall time (the upper middle one for an even count)."""
  return sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]


def measure_rounds(workloads, impls, extra=(), warm_runs: int = 3, rounds: int = 1,
                   report=print) -> list[dict]:
  """``measure`` of every workload and impl, ``rounds`` times, the impls' order reversed in odd
  rounds. One row a workload and impl: "cold" the median of its rounds' cold runs, "warm" the
  median of all its warm runs, "rounds" each round's ``measure``."""
  by_row = {(w, i): [] for w in workloads for i in impls}
  for r in range(rounds):
    for w in workloads:
      for impl in (impls if r % 2 == 0 else list(reversed(impls))):
        one = measure(w, impl, extra, warm_runs)
        by_row[w, impl].append(one)
        report(f"{w:7s} {impl:7s} round {r + 1}/{rounds}: cold {one['cold']['wall_s']:6.1f} s "
               f"(compile {one['cold']['compile_time_s']:.2f})  warm {one['warm']['wall_s']:6.1f}"
               f" s (compile {one['warm']['compile_time_s']:.2f})  {one['cold']['path']}")
  return [{"workload": w, "impl": impl, "cold": _median([m["cold"] for m in runs]),
           "warm": _median([x for m in runs for x in m["warm_runs"]]),
           "warm_walls": [x for m in runs for x in m["warm_walls"]], "rounds": runs}
          for (w, impl), runs in by_row.items()]


def ahead(rows: list[dict]) -> list[str]:
  """A line a workload with two impls measured in the same rounds: in how many rounds each was
  at or ahead of the other, cold and warm (a round's warm wall: its median warm run)."""
  lines = []
  for w in dict.fromkeys(r["workload"] for r in rows):
    pair = [r for r in rows if r["workload"] == w]
    if len(pair) != 2 or len(pair[0]["rounds"]) < 2:
      continue
    a, b = pair
    n = len(a["rounds"])
    counts = []
    for kind in ("cold", "warm"):
      walls = [(x[kind]["wall_s"], y[kind]["wall_s"]) for x, y in zip(a["rounds"], b["rounds"])]
      counts.append(f"{kind}: {a['impl']} at or ahead in {sum(p <= q for p, q in walls)} of {n}"
                    f", {b['impl']} in {sum(q <= p for p, q in walls)}")
    lines.append(f"- {w}: " + "; ".join(counts))
  return lines


def table(rows: list[dict]) -> str:
  lines = ["| workload | impl | path | cold wall s | cold compile s | warm wall s | "
           "warm compile s | train s |", "|---|---|---|---|---|---|---|---|"]
  for r in rows:
    c, w = r["cold"], r["warm"]
    lines.append(f"| {r['workload']} | {r['impl']} | {c['path']} | {c['wall_s']:.1f} | "
                 f"{c['compile_time_s']:.2f} | {w['wall_s']:.1f} | {w['compile_time_s']:.2f} | "
                 f"{w['train_time_s']:.3f} |")
  return "\n".join(lines)


def main(argv):
  del argv
  extra = [*_EXTRA.value, *([f"--epochs={_EPOCHS.value}"] if _EPOCHS.value else []),
           *([f"--data_dir={_DATA_DIR.value}"] if _DATA_DIR.value else [])]
  out_dir = pathlib.Path(_OUT_DIR.value)
  cli.known("--workloads", _WORKLOADS.value, ("mlp", "cnn", "logreg"))
  cli.known("--impls", _IMPLS.value, ("xla", "pallas", "triton", "numpy"))
  # The flags each run is given by this script: the rows' labels and files depend on them.
  if set_here := [e for e in _EXTRA.value
                  if e.split("=")[0].lstrip("-") in ("out", "impl", "model", "compilation_cache")]:
    raise ConfigError(f"--extra {','.join(set_here)}: end_to_end sets --out, --impl, "
                      "--model and --compilation_cache itself (use --impls, --workloads)")
  if _EPOCHS.value is not None:
    cli.at_least("--epochs", _EPOCHS.value, 1)
  cli.at_least("--warm_runs", _WARM_RUNS.value, 1)
  cli.at_least("--rounds", _ROUNDS.value, 1)
  cli.writable(out_dir / "end_to_end.json", "--out_dir")
  rows = measure_rounds(_WORKLOADS.value, _IMPLS.value, extra, _WARM_RUNS.value, _ROUNDS.value,
                        report=lambda line: print(line, flush=True))
  first = rows[0]["cold"] if rows else {}
  lines = ahead(rows)
  n = _ROUNDS.value
  rounds = (f"{n} rounds, the impls' order reversed every other round, each anew: a "
            f"row's cold wall is the median of its rounds', its warm wall the median of its "
            f"{n * _WARM_RUNS.value} warm runs" if n > 1 else
            f"cold, then {_WARM_RUNS.value} warm runs (the median's wall)")
  text = (f"# Time to a trained network\n\nGenerated by `python -m benchmarks.end_to_end` on "
          f"{time.strftime('%Y-%m-%d')}: {first.get('device')}, jax {first.get('jax_version')}."
          f"\n\nWall: the whole process of `python -m experiments.mnist --model=W --impl=I`, "
          f"with an empty compilation cache of its own: {rounds} (all of them in "
          f"end_to_end.json). Compile and train: as the script reported them.\n\n{table(rows)}\n"
          + "".join(f"\n{line}" for line in lines) + ("\n" if lines else ""))
  runner.write_json({"rows": rows}, out_dir / "end_to_end.json")
  files.write_atomically(out_dir / "END_TO_END.md", text)
  print("\n".join([table(rows), *lines]))


if __name__ == "__main__":  # The flags only here: benchmarks.bench imports this module.
  _WORKLOADS = flags.DEFINE_list("workloads", ["mlp", "cnn", "logreg"], "Models to run.")
  _IMPLS = flags.DEFINE_list("impls", ["xla", "pallas"], "Impls to run.")
  _EPOCHS = flags.DEFINE_integer("epochs", None, "Epochs (default: the model's).")
  _OUT_DIR = flags.DEFINE_string("out_dir", "docs", "Where END_TO_END.md and the JSON go.")
  _DATA_DIR = flags.DEFINE_string("data_dir", None, "Folder with the MNIST files.")
  _WARM_RUNS = flags.DEFINE_integer("warm_runs", 3, "Warm processes a row (the median's "
                                     "wall is reported).")
  _ROUNDS = flags.DEFINE_integer("rounds", 1, "Times the whole set runs, the impls' order "
                                 "reversed every other round (medians over the rounds).")
  _EXTRA = flags.DEFINE_list("extra", [], "More flags for every run, e.g. --train_limit=1000.")
  cli.run(main)
