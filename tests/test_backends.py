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
from pallas_kernels.fused import cluster_mlp_mgpu
from pallas_kernels.ops import dense, dense_mgpu


def resolved(**kw):
  return paths.resolve(config.resolve(config.Config(impl="pallas", **kw)))


def _minor():
  return tuple(int(v) for v in jax.__version__.split(".")[:2])


def test_this_jax_deprecates_the_triton_backend_from_0_11():
  want = "supported" if _minor() < (0, 11) else "deprecated"
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
  with pytest.raises(config.ConfigError, match="--fusion=ops: this jax has no Pallas Triton "
                     "backend, which the op kernels lower through; --impl=xla trains"):
    resolved(model="mlp", fusion="ops")
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)  # Mosaic GPU: unaffected
  monkeypatch.setattr(cluster_mlp_mgpu, "lowers", lambda: None)
  assert resolved(model="mlp").fusion == "epoch"
  assert paths.population(config.resolve(config.Config(impl="pallas", model="cnn")),
                          64).fusion == "xla"


def _lower_a_triton_kernel():
  x = jax.ShapeDtypeStruct((64, 32), jnp.float32)
  w = jax.ShapeDtypeStruct((32, 16), jnp.float32)
  f = jax.jit(lambda x, w: dense.dense(x, w, interpret=False))
  return f.trace(x, w).lower(lowering_platforms=("cuda",))


@pytest.mark.skipif(_minor() < (0, 11), reason="this jax does not deprecate the Triton backend")
def test_the_guard_turns_a_triton_lowering_into_an_error():
  """Inside ``triton_forbidden`` a Triton lowering raises jax's own error; after it, the
  deprecation is a warning again."""
  with backends.triton_forbidden():
    with pytest.raises(ValueError, match="Pallas Triton backend is deprecated"):
      _lower_a_triton_kernel()
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
