"""benchmarks.end_to_end's rounds: the order of the runs, the medians and the counts of rounds
ahead, on made-up wall times (the processes themselves are the training script's, tested
elsewhere)."""

from benchmarks import end_to_end


def test_rounds_alternate_the_impls_and_take_medians(monkeypatch):
  calls = []
  walls = iter([
      # round 1 (xla, then pallas), a cold run and two warm runs each
      10.0, 3.0, 3.4,  9.0, 3.1, 3.3,
      # round 2 (pallas first)
      12.0, 2.9, 3.0,  11.0, 3.5, 3.2,
      # round 3 (xla, then pallas)
      9.5, 3.3, 3.3,  9.9, 3.0, 3.1])

  def one_process(workload, impl, cache, out, extra=()):
    calls.append((impl, out.name))
    return {"wall_s": next(walls), "compile_time_s": 0.1, "train_time_s": 0.01,
            "path": impl, "device": "cpu", "jax_version": "x", "notices": []}
  monkeypatch.setattr(end_to_end, "one_process", one_process)
  rows = end_to_end.measure_rounds(["mlp"], ["xla", "pallas"], warm_runs=2, rounds=3,
                                   report=lambda line: None)
  assert [impl for impl, out in calls if out == "cold.json"] == [
      "xla", "pallas", "pallas", "xla", "xla", "pallas"]
  xla, pallas = rows
  assert (xla["impl"], pallas["impl"]) == ("xla", "pallas")
  # xla's colds 10.0, 11.0, 9.5 -> 10.0; pallas' 9.0, 12.0, 9.9 -> 9.9
  assert xla["cold"]["wall_s"] == 10.0 and pallas["cold"]["wall_s"] == 9.9
  # xla's warm runs 3.0 3.4 3.5 3.2 3.3 3.3 -> upper middle 3.3; pallas' 3.1 3.3 2.9 3.0 3.0 3.1
  assert xla["warm"]["wall_s"] == 3.3 and pallas["warm"]["wall_s"] == 3.1
  assert len(xla["rounds"]) == 3 and xla["warm_walls"] == [3.0, 3.4, 3.5, 3.2, 3.3, 3.3]
  # Rounds: cold xla 10.0/11.0/9.5 against pallas 9.0/12.0/9.9: xla ahead in 2, pallas in 1;
  # warm (each round's median run, the upper of two) xla 3.4/3.5/3.3, pallas 3.3/3.0/3.1.
  assert end_to_end.ahead(rows) == [
      "- mlp: cold: xla at or ahead in 2 of 3, pallas in 1; warm: xla at or ahead in 0 of 3, "
      "pallas in 3"]


def test_one_round_says_nothing_about_rounds_ahead(monkeypatch):
  monkeypatch.setattr(end_to_end, "one_process", lambda *a, **k: {
      "wall_s": 1.0, "compile_time_s": 0.1, "train_time_s": 0.01, "path": "p", "device": "cpu",
      "jax_version": "x", "notices": []})
  rows = end_to_end.measure_rounds(["cnn"], ["xla", "pallas"], warm_runs=1,
                                   report=lambda line: None)
  assert len(rows) == 2 and end_to_end.ahead(rows) == []
