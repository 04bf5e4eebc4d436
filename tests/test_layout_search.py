"""pallas_kernels.mgpu.layout_search: jax 0.11's Mosaic GPU layout inference with one numbering
of the kernel a sort lowers the kernels that install it (the cluster MLP's, softmax
regression's) to the same modules as without it. jax 0.11 only (the patch's only version; the
CI's jax 0.10 and 0.12 skip it: run it with jax 0.11)."""

import re

import jax
import jax.numpy as jnp
import pytest

from pallas_kernels.fused import cluster_mlp_mgpu, logreg_mgpu
from pallas_kernels.mgpu import layout_search


def _layer(n, m):
  return {"w": jax.ShapeDtypeStruct((n, m), jnp.float32),
          "b": jax.ShapeDtypeStruct((m,), jnp.float32)}


def _mlp(hidden, steps, precision):
  """The cluster MLP's epoch (784-``hidden``-10), its abstract arguments."""
  fn = lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, precision)
  return fn, ([_layer(784, hidden), _layer(hidden, 10)],
              jax.ShapeDtypeStruct((steps, 64, 832), jnp.bfloat16),
              jax.ShapeDtypeStruct((steps, 10, 64), jnp.bfloat16))


def _logreg(steps, precision):
  """Softmax regression's epoch, its abstract arguments."""
  fn = lambda p, x, o: logreg_mgpu.train_steps(p, x, o, 0.5, precision)
  return fn, ([_layer(784, 10)], jax.ShapeDtypeStruct((steps, 64, 832), jnp.bfloat16),
              jax.ShapeDtypeStruct((steps, 64, 16), jnp.float32))


def _lowered(fn, args, monkeypatch) -> str:
  """The kernel's Mosaic GPU module as lowered (printed without locations: the serialized form
  differs between two lowerings in one process)."""
  from jax.experimental.mosaic.gpu import core
  jax.clear_caches()
  cluster_mlp_mgpu._call.cache_clear()
  logreg_mgpu._call.cache_clear()
  printed, serde = [], core._run_serde_pass

  def capture(module, *, serialize, **kw):
    if serialize:
      printed.append(module.operation.get_asm(enable_debug_info=False))
    return serde(module, serialize=serialize, **kw)
  monkeypatch.setattr(core, "_run_serde_pass", capture)
  jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
  assert len(printed) == 1
  return re.sub(r"anonymous_\d+", "anonymous", printed[0])  # (a name counted per process)


@pytest.mark.skipif(layout_search._jax_version() != (0, 11), reason="the patch is jax 0.11's")
@pytest.mark.parametrize("kernel", [lambda: _mlp(256, 1, "float32"),
                                    lambda: _mlp(512, 2, "bfloat16"),
                                    lambda: _logreg(2, "float32")],
                         ids=["mlp", "mlp 512 bfloat16", "logreg"])
def test_same_kernel(kernel, monkeypatch):
  texts = []
  for enabled in (True, False):
    monkeypatch.setattr(layout_search, "ENABLED", enabled)
    texts.append(_lowered(*kernel(), monkeypatch))
  from jax.experimental.mosaic.gpu import constraints
  assert getattr(constraints.compute_transitively_equal_vars, "shared_numbering", False)
  assert texts[0] == texts[1]
