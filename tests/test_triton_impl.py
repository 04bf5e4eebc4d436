"""impl="triton": the MLP family's kernels in raw Triton through jax-triton. Where they cannot run
(no CUDA GPU or no jax-triton, as in CPU CI), the impl refuses with one line and the GPU tests
are skipped with that reason; on the device, the kernels are checked against float64 here and
in ``experiments.check_kernels --only=triton``."""

import dataclasses
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import triton_kernels
from jaxshallow import mlp, ops, train
from jaxshallow.run import config

WHY = triton_kernels.unavailable()
gpu = pytest.mark.skipif(WHY is not None, reason=f"the Triton kernels need {WHY}")


@pytest.mark.skipif(WHY is None, reason="the Triton kernels can run here")
def test_refused_with_one_line_where_it_cannot_run():
  with pytest.raises(config.ConfigError, match=r"^--impl=triton needs "):
    config.resolve(config.Config(model="mlp", impl="triton"))


def test_cnn_refused():
  with pytest.raises(config.ConfigError, match="covers the MLP family"):
    config.resolve(config.Config(model="cnn", impl="triton"))


def test_an_impl():
  assert "triton" in ops.IMPLS


@gpu
@pytest.mark.parametrize("m,k,n", [(1, 784, 256), (37, 100, 10), (64, 784, 256), (70, 33, 50)])
@pytest.mark.parametrize("relu,bias", [(True, True), (False, False)])
def test_dense_against_float64(m, k, n, relu, bias):
  from triton_kernels import dense
  rng = np.random.default_rng(m * k + n)
  x = rng.standard_normal((m, k), np.float32)
  w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
  b = rng.standard_normal(n).astype(np.float32) if bias else None
  dy = rng.standard_normal((m, n), np.float32)
  op = lambda x, w, b: dense.dense(x, w, b, relu=relu, precision="float32")
  y, vjp = jax.vjp(op, x, w, b)
  dx, dw, db = vjp(dy)
  x64, w64 = x.astype(np.float64), w.astype(np.float64)
  z = x64 @ w64 + (b.astype(np.float64) if bias else 0)
  g = dy * (z > 0) if relu else dy
  np.testing.assert_allclose(y, np.maximum(z, 0) if relu else z, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dx, g @ w64.T, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dw, x64.T @ g, rtol=1e-5, atol=1e-4)
  if bias:
    np.testing.assert_allclose(db, g.sum(0), rtol=1e-5, atol=1e-4)
  else:
    assert db is None


@gpu
@pytest.mark.parametrize("m,c", [(1, 10), (37, 10), (64, 3), (1000, 10)])
def test_softmax_xent_against_float64(m, c):
  from triton_kernels import softmax_xent
  rng = np.random.default_rng(m + c)
  z = (3 * rng.standard_normal((m, c))).astype(np.float32)
  labels = rng.integers(0, c, m).astype(np.int32)
  (loss, correct), dz = jax.value_and_grad(
      lambda z: softmax_xent.softmax_cross_entropy(z, labels), has_aux=True)(z)
  z64 = z.astype(np.float64)
  logp = z64 - z64.max(1, keepdims=True)
  logp -= np.log(np.exp(logp).sum(1, keepdims=True))
  want = np.exp(logp)
  want[np.arange(m), labels] -= 1
  np.testing.assert_allclose(loss, -logp[np.arange(m), labels].mean(), rtol=1e-5)
  np.testing.assert_allclose(dz, want / m, rtol=1e-5, atol=1e-7)
  assert int(correct) == int(np.sum(z.argmax(1) == labels))


@gpu
def test_train_step_matches_xla():
  params = mlp.init_mlp(jax.random.key(0), (784, 64, 10))
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.random((50, 784), np.float32))  # the trainers scale the pixels first
  y = jnp.asarray(rng.integers(0, 10, 50).astype(np.int32))
  tx = train.make_optimizer("sgd", 0.5)
  outs = {}
  for impl in ("xla", "triton"):
    p, s = params, tx.init(params)
    losses = []
    for _ in range(3):
      p, s, metrics = train.train_step(p, s, (x, y), tx=tx, impl=impl)
      losses.append(float(metrics["loss"]))
    outs[impl] = losses
  np.testing.assert_allclose(outs["triton"], outs["xla"], rtol=1e-5)


@pytest.mark.parametrize("before", [None, "/a/cache"])
def test_importing_jax_triton_keeps_triton_cache_dir(before, tmp_path, monkeypatch):
  """jax-triton 0.3.1 sets TRITON_CACHE_DIR to "" on import, which breaks torch.compile in the
  same process (the bench runs both); the package puts the variable back as it was."""
  (tmp_path / "jax_triton.py").write_text('import os\nos.environ["TRITON_CACHE_DIR"] = ""\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.delitem(sys.modules, "jax_triton", raising=False)
  if before is None:
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
  else:
    monkeypatch.setenv("TRITON_CACHE_DIR", before)
  triton_kernels._import_jax_triton()
  assert os.environ.get("TRITON_CACHE_DIR") == before


@pytest.mark.skipif(WHY is None, reason="the Triton kernels can run here")
def test_kernel_times_refuses_with_one_line_where_it_cannot_run():
  root = pathlib.Path(__file__).resolve().parents[1]
  p = subprocess.run([sys.executable, "-m", "benchmarks.kernel_times"], cwd=root,
                     env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                     timeout=300)
  assert p.returncode != 0
  assert p.stderr.strip() == f"error: benchmarks.kernel_times needs {WHY}"


def test_kernel_times_counts_code_lines():
  from benchmarks import kernel_times

  def f(x):
    """Two lines
    of docstring."""
    # a comment

    return x + 1

  assert kernel_times.code_lines(f) == 2  # the def and the return


def test_typed_ffi_lowering_hands_the_call_description_over_as_opaque(monkeypatch):
  """jax-triton 0.3's lowering, seen through triton_kernels.ffi: api_version 4, and the call
  description that it passes as backend_config becomes the ``opaque`` attribute."""
  from triton_kernels import ffi
  calls = []

  def legacy(name, **kwargs):
    calls.append((name, kwargs))
    return lambda ctx, *args, **attrs: ("lowered", args, attrs)

  monkeypatch.setattr(jax.ffi, "ffi_lowering", legacy)
  with ffi._typed_ffi_lowering():
    rule = jax.ffi.ffi_lowering(ffi.TARGET, api_version=2, backend_config=b"call",
                                operand_output_aliases={0: 0})
    out = rule("ctx", "x", "w")
  assert jax.ffi.ffi_lowering is legacy  # put back
  assert calls == [(ffi.TARGET, {"api_version": 4, "operand_output_aliases": {0: 0}})]
  assert out == ("lowered", ("x", "w"), {"opaque": b"call"})


@pytest.mark.parametrize("text", ["16,16", "a,b,c", "8,16,16", "24,16,16", "auto"])
def test_kernel_times_refuses_bad_blocks_in_one_line(text):
  from benchmarks import kernel_times
  from jaxshallow.run import config
  with pytest.raises(config.ConfigError, match="--triton_blocks takes three sizes of 16 or more"):
    kernel_times.parse_blocks(text)
  assert kernel_times.parse_blocks("16,16,128") == [16, 16, 128]
