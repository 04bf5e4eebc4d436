"""What each pallas path lowers through, and the project's answers to jax's deprecation of
Pallas' Triton backend (jaxshallow/backends.py): the notice, the evaluation of Mosaic GPU paths
in xla's ops, xla's path where a jax has no Triton backend, and the guard of the device checks."""

import logging
import warnings

import jax
import jax.numpy as jnp
import pytest

from jaxshallow import backends, paths
from jaxshallow.run import config
from pallas_kernels import common
from pallas_kernels.fused import cluster_mlp_mgpu
from pallas_kernels.ops import dense, dense_mgpu


def resolved(**kw):
  return paths.resolve(config.resolve(config.Config(impl="pallas", **kw)))


def test_this_jax_deprecates_the_triton_backend_from_0_11():
  want = "supported" if common.jax_version() < (0, 11) else "deprecated"
  assert backends.triton_state() == want


def test_each_path_lowers_through_one_backend(monkeypatch):
  assert backends.of_path("xla") == "xla"
  assert backends.of_path("ops") == backends.of_path("step") == "triton"
  assert backends.of_path("epoch", "grid") == "triton"
  for kernel in backends.MOSAIC_EPOCH_KERNELS:
    assert backends.of_path("epoch", kernel) == "mosaic"
  assert backends.of_path("cluster") == backends.of_path("stream") == "mosaic"
  # A Config: on the CPU the MLP takes the grid kernel, on Hopper the cluster kernel.
  assert paths.backend(resolved(model="mlp")) == "triton"
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(cluster_mlp_mgpu, "lowers", lambda: None)
  assert paths.backend(resolved(model="mlp")) == "mosaic"
  assert paths.backend(resolved(model="logreg")) == "mosaic"
  assert paths.backend(resolved(model="cnn")) == "triton"


def test_mosaic_paths_evaluate_in_xla_ops(monkeypatch):
  """The evaluation (a forward pass) of a run on Mosaic GPU kernels takes xla's ops, so that
  nothing of the run lowers through the deprecated backend; the op kernels' and the grid
  kernel's runs keep the pallas ops."""
  assert paths.eval_impl(resolved(model="mlp")) == "pallas"  # The grid kernel (CPU)
  assert paths.eval_impl(resolved(model="mlp", fusion="xla")) == "xla"
  assert paths.eval_impl(config.resolve(config.Config(impl="xla"))) == "xla"
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(cluster_mlp_mgpu, "lowers", lambda: None)
  cfg = resolved(model="mlp")
  assert paths.describe(cfg) == "cluster kernel" and paths.eval_impl(cfg) == "xla"
  assert paths.ops_impl(cfg) == "pallas"  # The training still the kernel's
  from jaxshallow.run import runner, trainers
  cfg = resolved(model="regression", dataset="small", compilation_cache="off")
  assert paths.backend(cfg) == "mosaic"
  trainer = trainers.make_trainer(cfg, runner.load_data(cfg))  # Built, not compiled
  assert trainer.eval_static["impl"] == "xla" and trainer.static["impl"] == "pallas"


def test_the_notice_names_the_kernels_on_a_gpu_only(monkeypatch):
  from jaxshallow.run.runner import triton_notice
  cfg = resolved(model="cnn")
  assert triton_notice(cfg) is None  # The CPU: the kernels are interpreted.
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(backends, "triton_state", lambda: "deprecated")
  line = triton_notice(cfg)
  assert line.startswith("note: the step kernels lower through Pallas' Triton backend")
  assert "--impl=xla" in line and "\n" not in line
  assert triton_notice(resolved(model="cnn", fusion="xla")) is None
  monkeypatch.setattr(backends, "triton_state", lambda: "supported")
  assert triton_notice(cfg) is None


def test_without_a_triton_backend_the_default_is_xla_and_an_asked_path_refused(monkeypatch,
                                                                               caplog):
  monkeypatch.setattr(backends, "triton_state", lambda: "removed")
  with caplog.at_level(logging.WARNING):
    cfg = resolved(model="cnn")
  assert cfg.fusion == "xla" and "no Pallas Triton backend" in caplog.text
  assert paths.describe(cfg) == "xla (no Pallas Triton backend)"
  for asked, match in ((dict(fusion="ops"), "--fusion=ops needs Pallas' Triton backend"),
                       (dict(blocks="16,16,16"), r"--fusion=ops \(--blocks\) needs"),
                       (dict(fusion="epoch"), "--fusion=epoch needs")):  # The grid kernel (CPU)
    with pytest.raises(config.ConfigError, match=match):
      resolved(model="mlp", **asked)
  assert resolved(model="mlp", fusion="xla").fusion == "xla"
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)  # Mosaic GPU: unaffected
  monkeypatch.setattr(cluster_mlp_mgpu, "lowers", lambda: None)
  assert resolved(model="mlp").fusion == "epoch"
  assert paths.population(config.resolve(config.Config(impl="pallas", model="mlp")),
                          64).fusion == "cluster"
  assert paths.population(config.resolve(config.Config(impl="pallas", model="cnn")),
                          64).fusion == "xla"


# A process in which Pallas' Triton modules cannot be imported, as with a jax that removed them.
WITHOUT_TRITON = """
import sys
class Block:
  def find_spec(self, name, path=None, target=None):
    if name.startswith(("jax._src.pallas.triton", "jax.experimental.pallas.triton")):
      raise ImportError(f"no module {name} (blocked)")
sys.meta_path.insert(0, Block())
from jaxshallow import backends
backends.triton_state = lambda: "removed"
"""


def _without_triton(code, tmp_path):
  import subprocess
  import sys
  script = tmp_path / "run.py"
  script.write_text(WITHOUT_TRITON + code)
  return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                        timeout=600)


def test_a_jax_without_triton_trains_on_xla_and_lowers_the_mosaic_epoch(tmp_path):
  """Nothing Triton is imported on the way: the default pallas run trains (on xla's path,
  here the CPU, where the grid kernel would have run), and the Mosaic GPU epoch path of the
  regression net (its cluster kernel, as on Hopper) still lowers for a GPU."""
  p = _without_triton("""
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import paths, synthetic, train
from jaxshallow.run import config, runner
r = runner.run(config.Config(impl="pallas", model="regression", dataset="small", hidden=(8,),
                             epochs=1, train_limit=512, test_limit=64), log=lambda _: None)
print("fusion", r["fusion"], r["path"])
from pallas_kernels.ops import dense_mgpu
dense_mgpu.on_hopper = lambda: True
cfg = paths.resolve(config.resolve(config.Config(impl="pallas", model="regression",
                                                 dataset="large")))
print("mosaic", cfg.fusion, paths.describe(cfg))
params = [{"w": jax.ShapeDtypeStruct((32, 256), jnp.float32)},
          {"w": jax.ShapeDtypeStruct((256, 1), jnp.float32)}]
tx = train.make_optimizer("sgd", 0.002)
x = jax.ShapeDtypeStruct((2 * 256, 32), jnp.float32)
y = jax.ShapeDtypeStruct((2 * 256,), jnp.float32)
order = jax.ShapeDtypeStruct((2 * 256,), jnp.int32)
f = jax.jit(lambda p, s, x, y, o: train.train_epoch_no_donate(
    p, s, x, y, o, tx=tx, batch_size=256, impl="pallas", model=train.models.REGRESSION,
    fusion="epoch"))
text = f.trace(params, tx.init(params), x, y, order).lower(lowering_platforms=("cuda",)).as_text()
print("lowered", "mosaic_gpu" in text, "triton" in text)
""", tmp_path)
  assert p.returncode == 0, p.stderr[-2000:]
  lines = p.stdout.splitlines()
  assert "fusion xla xla (no Pallas Triton backend)" in lines
  assert "mosaic epoch cluster kernel" in lines
  assert "lowered True False" in lines


def _lower_a_triton_kernel():
  x = jax.ShapeDtypeStruct((64, 32), jnp.float32)
  w = jax.ShapeDtypeStruct((32, 16), jnp.float32)
  f = jax.jit(lambda x, w: dense.dense(x, w, interpret=False))
  return f.trace(x, w).lower(lowering_platforms=("cuda",))


@pytest.mark.skipif(common.jax_version() < (0, 11),
                    reason="this jax does not deprecate the Triton backend")
def test_the_guard_turns_a_triton_lowering_into_an_error():
  """Inside ``triton_forbidden`` a Triton lowering raises jax's own error; after it, the
  deprecation is a warning again."""
  with backends.triton_forbidden():
    with pytest.raises(ValueError, match="Pallas Triton backend is deprecated") as e:
      _lower_a_triton_kernel()
  assert backends.forbidden(e.value) and not backends.forbidden(ValueError("other"))
  with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    try:
      _lower_a_triton_kernel()
    except RuntimeError as e:  # jax 0.12 lowers Triton kernels only with a GPU present,
      assert "No supported GPU devices" in str(e)  # after the deprecation's warning.
  assert any("Pallas Triton backend is deprecated" in str(w.message) for w in seen)


def test_the_device_checks_guard_the_mosaic_groups():
  from experiments import check_kernels
  assert set(check_kernels.MOSAIC_GROUPS) <= set(check_kernels.GROUPS)
  assert "barrier" not in check_kernels.MOSAIC_GROUPS  # mlp_epoch's stress: Triton
