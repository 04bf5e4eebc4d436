"""pallas_kernels.mgpu.layout_search (jax 0.11): the kernels that install it (the cluster MLP's,
softmax regression's) lower to the same Mosaic GPU modules with it as without it, and inside
the inference's sort it prints every variable as jax does. Run with jax 0.11 (the patch's only
version): the CI's jax 0.10 and 0.12 skip it."""

import re

import jax
import jax.numpy as jnp
import pytest

from pallas_kernels import common
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


JAX_011 = pytest.mark.skipif(common.jax_version() != (0, 11), reason="the patch is jax 0.11's")
KERNELS = pytest.mark.parametrize("kernel", [lambda: _mlp(256, 1, "float32"),
                                             lambda: _mlp(512, 2, "bfloat16"),
                                             lambda: _logreg(2, "float32")],
                                  ids=["mlp", "mlp512_bfloat16", "logreg"])


@JAX_011
@KERNELS
def test_same_kernel(kernel, monkeypatch):
  texts = []
  for enabled in (True, False):
    monkeypatch.setattr(layout_search, "ENABLED", enabled)
    texts.append(_lowered(*kernel(), monkeypatch))
  assert texts[0] == texts[1]


@JAX_011
@KERNELS
def test_same_strings(kernel, monkeypatch):
  """Inside the sort (the shared numbering in effect) every variable prints as jax prints it."""
  from jax.experimental.mosaic.gpu import constraints
  _lowered(*kernel(), monkeypatch)  # (the kernel's builder installs the patch)
  sort, compared = layout_search.ORIGINALS["sort"], []

  def checked(system):
    sites = {v.key for c in system.constraints if isinstance(c, constraints.Equals)
             for v in (c.lhs, c.rhs) if isinstance(v, constraints.Variable)}
    assert layout_search._sorting.state is not None
    for site in sites:
      assert layout_search.printed(site) == layout_search.ORIGINALS["str"](site)
    compared.append(len(sites))
    return sort(system)
  monkeypatch.setitem(layout_search.ORIGINALS, "sort", checked)
  _lowered(*kernel(), monkeypatch)
  assert compared and min(compared) > 0
