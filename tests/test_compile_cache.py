"""jaxshallow.compile_cache: a second run in a fresh process compiles from the cache, the same
losses; off means nothing is kept; the user's own JAX cache is left alone."""

import json
import os
import subprocess
import sys

import jax
import pytest

from jaxshallow import compile_cache, mosaic_runtime
from jaxshallow.run import config, runner

from conftest import ROOT


def _run(tmp_path, name, *flags, env_cache=None):
  """experiments.regression (the pallas epoch kernel, interpret mode on the CPU) in a fresh
  process; returns its result JSON."""
  out = tmp_path / f"{name}.json"
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  env.pop("JAXSHALLOW_COMPILATION_CACHE")
  if env_cache:
    env["JAXSHALLOW_COMPILATION_CACHE"] = env_cache
  subprocess.run([sys.executable, "-m", "experiments.regression", "--impl=pallas", "--epochs=2",
                  f"--out={out}", *flags], cwd=ROOT, env=env, check=True, capture_output=True)
  return json.loads(out.read_text())


def test_a_second_run_compiles_from_the_cache(tmp_path):
  cache = tmp_path / "cache"
  first = _run(tmp_path, "first", f"--compilation_cache={cache}")
  kept = sorted((cache / "lowered").iterdir())
  second = _run(tmp_path, "second", env_cache=str(cache))  # The environment names it too.
  assert second["epoch_loss"] == first["epoch_loss"]
  assert kept and sorted((cache / "lowered").iterdir()) == kept  # Nothing new: all read back.
  assert any((cache / "xla").iterdir())
  assert second["compile_time_s"] * 2 <= first["compile_time_s"], (first["compile_time_s"],
                                                                   second["compile_time_s"])


def test_off_keeps_nothing(tmp_path):
  cache = tmp_path / "cache"
  _run(tmp_path, "a", "--compilation_cache=off", env_cache=str(cache))
  _run(tmp_path, "b", env_cache="off")
  assert not cache.exists()


@pytest.fixture
def restore_jax_cache():
  saved = jax.config.jax_compilation_cache_dir
  yield
  compile_cache.enable("off")
  jax.config.update("jax_compilation_cache_dir", saved)


def test_other_settings_miss_the_cache(tmp_path, restore_jax_cache):
  """Another learning rate is another program: new entries, not the first one's losses; another
  seed is the same program: no new entry."""
  small = dict(impl="xla", model="regression", dataset="small", hidden=(8,), epochs=2,
               compilation_cache=str(tmp_path))
  entries = lambda: len(list((tmp_path / "lowered").iterdir()))
  a = runner.run(config.Config(lr=0.002, **small), log=lambda _: None)
  n = entries()
  b = runner.run(config.Config(lr=0.004, **small), log=lambda _: None)
  assert entries() > n
  n = entries()
  again = runner.run(config.Config(lr=0.002, **small), log=lambda _: None)
  runner.run(config.Config(lr=0.002, seed=1, **small), log=lambda _: None)
  assert entries() == n
  assert a["epoch_loss"] != b["epoch_loss"] and again["epoch_loss"] == a["epoch_loss"]


def test_the_users_own_jax_cache_is_left_alone(tmp_path, restore_jax_cache):
  jax.config.update("jax_compilation_cache_dir", str(tmp_path / "theirs"))
  assert compile_cache.enable(str(tmp_path / "ours")) == tmp_path / "ours"
  assert jax.config.jax_compilation_cache_dir == str(tmp_path / "theirs")


def test_an_unwritable_folder_is_one_line(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("")
  with pytest.raises(config.ConfigError, match="--compilation_cache .*cannot write there"):
    config.resolve(config.Config(compilation_cache=str(blocker)))


def test_a_long_compilation_says_so(tmp_path, restore_jax_cache, monkeypatch, caplog):
  monkeypatch.setattr(compile_cache, "NOTICE_AFTER_S", 0.0)
  small = dict(impl="xla", model="regression", dataset="small", hidden=(8,), epochs=1)
  runner.run(config.Config(compilation_cache=str(tmp_path), **small), log=lambda _: None)
  assert f"compiling the xla epoch (a first run of this network; kept in {tmp_path}" in \
      caplog.text


def test_an_entry_with_a_mosaic_gpu_kernel_imports_mosaic_gpu_first(tmp_path, monkeypatch):
  """A warm run traces nothing, so the entry itself says whether Mosaic GPU must be imported
  before its executable loads (the H100 refused it otherwise)."""
  import jax.numpy as jnp
  exported = jax.export.export(jax.jit(lambda x: x + 1))(jax.ShapeDtypeStruct((3,), jnp.float32))
  path = tmp_path / "entry"
  compile_cache._save(path, exported, "tree")
  imported = []
  monkeypatch.setattr(mosaic_runtime, "load", lambda: imported.append(1))
  assert compile_cache._load(path)[1] == "tree" and not imported  # No Mosaic GPU kernel in it.
  monkeypatch.setattr(compile_cache, "MOSAIC_GPU_CALL", "stablehlo.add")  # As if it were one.
  compile_cache._save(path, exported, "tree")
  assert compile_cache._load(path)[1] == "tree" and imported == [1]


def test_the_trainer_compiles_the_evaluation_beside_the_training():
  """``compile`` compiles every chunk shape the run evaluates (the regression net: the test
  and training sets, 2,560 rows each: chunks of 2,000 and 560), so the evaluation compiles
  nothing more, and gives the uncompiled evaluation's numbers."""
  from jaxshallow import train
  from jaxshallow.run import trainers
  cfg = config.resolve(config.Config(model="regression", dataset="medium", epochs=1,
                                     hidden=(16,), compilation_cache="off"))
  trainer = trainers.make_trainer(cfg, runner.load_data(cfg))
  trainer.compile()
  assert sorted(trainer.eval_fns) == [(560, 32), (2000, 32)]
  for split in ("test", "train"):
    got = trainer.evaluate(split)
    want = train.evaluate(trainer.params, *trainer.data[split], **trainer.static)
    assert got == pytest.approx(want, rel=1e-6)
  assert len(trainer.eval_fns) == 2


def test_the_trainer_lowers_the_evaluation_before_the_training(tmp_path, restore_jax_cache,
                                                                monkeypatch):
  """On the GPU the evaluation's XLA compile is the longer beside a Pallas kernel's, so it
  starts first: the training is not lowered before the evaluation's first program is (without
  the lowered cache, through it, and read back from it)."""
  from jaxshallow.run import jax_trainer, trainers
  events = []
  lower_and_compile = compile_cache.lower_and_compile

  class Noted:  # The evaluation's event, noting when it is set
    def __init__(self, event):
      self.event = event

    def set(self):
      events.append("evaluation lowered")
      self.event.set()

  def noted(jitted, *args, lowered=None, **static):
    return lower_and_compile(jitted, *args, lowered=lowered and Noted(lowered), **static)
  training = jax_trainer.JaxTrainer._compile_training

  def started(self):
    events.append("training started")
    return training(self)
  monkeypatch.setattr(compile_cache, "lower_and_compile", noted)
  monkeypatch.setattr(jax_trainer.JaxTrainer, "_compile_training", started)
  for cache in ("off", str(tmp_path), str(tmp_path)):  # (the second time: read back)
    events.clear()
    cfg = config.resolve(config.Config(model="regression", dataset="small", epochs=1,
                                       hidden=(8,), compilation_cache=cache))
    trainers.make_trainer(cfg, runner.load_data(cfg)).compile()
    assert events[:2] == ["evaluation lowered", "training started"], events


def test_programs_are_lowered_one_thread_at_a_time_and_compiled_outside_the_lock(
    tmp_path, restore_jax_cache, monkeypatch):
  """The evaluation compiles in a second thread; its tracing must not overlap the training's
  (jax registers effect types as modules are first used: a CI run failed with "Set changed size
  during iteration" in a ``pl.when``), while XLA's compile, what runs side by side, may. Through
  the lowered cache: the trace, the export and the exported call's lowering under the lock."""
  import jax.numpy as jnp
  held = []

  def recorded(name, f):
    def wrapper(*args, **kwargs):
      held.append((name, compile_cache.TRACING._is_owned()))
      return f(*args, **kwargs)
    return wrapper
  monkeypatch.setattr(jax.stages.Lowered, "compile",
                      recorded("compile", jax.stages.Lowered.compile))
  monkeypatch.setattr(compile_cache, "_export", recorded("export", compile_cache._export))
  monkeypatch.setattr(compile_cache, "_load", recorded("load", compile_cache._load))
  fn = jax.jit(lambda x, y: (x + y, x * y))
  x = jnp.arange(3.0)
  for folder in ("off", str(tmp_path)):
    compile_cache.enable(folder)
    held.clear()
    compiled = compile_cache.compile(fn, (x, x), {}, settings=None)
    assert [float(v) for v in compiled(x, x)[1]] == [0.0, 1.0, 4.0]
    assert ("compile", False) in held and ("compile", True) not in held, held
    if folder != "off":
      assert ("export", True) in held and ("load", True) in held and len(held) == 3, held
