"""A population through the cluster kernel (a cluster a member) on the CPU: the kernel of
several clusters lowers for a Hopper GPU, the chunked epoch around it (members in launches of at
most ``CLUSTER_CHUNK``, the last chunk padded) gives each member its own training, in float64
with the kernel's twin in its place, and the population's path picks it only where it can
train. Its numbers on the GPU: ``experiments.check_kernels --only=cluster_mlp``."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp
from jaxshallow.fused import epoch as fused_epoch, population as fused_population
from jaxshallow.run import config, population_run
from pallas_kernels import common
from pallas_kernels.fused import cluster_mlp_mgpu
from pallas_kernels.ops import dense_mgpu


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
def test_population_kernel_lowers():
  f32 = jnp.float32
  members, steps = 3, 2
  layer = lambda n, m: {"w": jax.ShapeDtypeStruct((members, n, m), f32),
                        "b": jax.ShapeDtypeStruct((members, m), f32)}
  fn = jax.jit(cluster_mlp_mgpu.train_population)
  text = fn.trace([layer(784, 256), layer(256, 10)],
                  jax.ShapeDtypeStruct((members, steps, 64, 832), jnp.bfloat16),
                  jax.ShapeDtypeStruct((members, steps, 10, 64), jnp.bfloat16),
                  jax.ShapeDtypeStruct((members,), f32)).lower(
                      lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text


def _check_each_member_its_own_run(kernel, widths, *, model, seed, members, sets, steps, extra,
                                   lrs, keys, accuracy_rtol):
  """``train_epoch_clusters`` with the kernel's twin in its place, in float64, on ``sets``
  orders (member i on order i mod sets): each member's params, loss and accuracy those of its
  own run of ``kernel.reference`` on its order, params and loss within 1e-10."""
  rng = np.random.default_rng(seed)
  n = steps * 64 + extra
  x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
  y = rng.integers(0, 10, n).astype(np.int32)
  orders = np.stack([rng.permutation(n) for _ in range(sets)]).astype(np.int32)
  with jax.enable_x64(True):
    params = [jax.tree.map(lambda a: jnp.asarray(a, jnp.float64),
                           mlp.init_mlp(jax.random.key(keys[i]), widths))
              for i in range(members)]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *params)
    got, metrics = fused_population.train_epoch_clusters(
        stacked, jnp.asarray(x), jnp.asarray(y), jnp.asarray(orders), jnp.asarray(lrs),
        batch_size=64, precision="float32", model=model, twin=True)
    for i in range(members):
      xs, onehot = kernel.batches(jnp.asarray(x.reshape(n, -1)), jnp.asarray(y),
                                  orders[i % sets], steps)
      want, losses, correct = kernel.reference(
          params[i], xs.astype(jnp.float64), onehot.astype(jnp.float64), lrs[i])
      for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-10, atol=1e-13)
      want_m = fused_epoch.epoch_metrics(losses, correct, 64)
      np.testing.assert_allclose(float(metrics["loss"][i]), float(want_m["loss"]), rtol=1e-10)
      np.testing.assert_allclose(float(metrics["accuracy"][i]), float(want_m["accuracy"]),
                                 rtol=accuracy_rtol, atol=0)


def test_chunked_epoch_gives_each_member_its_own_run(monkeypatch):
  """5 members in chunks of 2 (the last padded with a copy of member 0): each member's params,
  loss and accuracy are those of its own run of the twin, in float64 within 1e-10 (the twin
  itself follows train_step: test_cluster_mlp_mgpu)."""
  monkeypatch.setattr(fused_population, "CLUSTER_CHUNK", 2)
  _check_each_member_its_own_run(cluster_mlp_mgpu, (784, 256, 10), model="mlp", seed=0,
                                 members=5, sets=5, steps=3, extra=7,
                                 lrs=np.asarray([0.05, 0.1, 0.2, 0.3, 0.4]), keys=range(5),
                                 accuracy_rtol=1e-12)


def test_population_path_takes_the_cluster_kernel_where_it_can(monkeypatch):
  """On a Hopper GPU (pretended here) the reference MLP's population takes, by default and with
  --fusion=epoch, the streamed kernel where it was measured faster (the sizes and the GPU of
  paths.STREAM_MEASURED, members a device, a checked jax), else the cluster kernel; another
  batch, another optimizer, another precision or --fusion=step take neither."""
  from jaxshallow import paths
  from pallas_kernels.fused import stream_population_mgpu
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(cluster_mlp_mgpu, "lowers", lambda: None)
  monkeypatch.setattr(paths, "STREAM_MEASURED", {jax.devices()[0].device_kind: (64, 128)})
  version = common.jax_version()
  monkeypatch.setattr(stream_population_mgpu, "CHECKED", (version,))
  cfg = config.Config(impl="pallas")
  path = lambda per_device=64, **kw: population_run._population_cfg(
      dataclasses.replace(cfg, **kw), per_device).fusion
  for fusion in (None, "epoch"):
    for per_device in (1, 8, 32, 96, 192):
      assert path(per_device, fusion=fusion) == "cluster"
    for per_device in (64, 128):
      assert path(per_device, fusion=fusion) == "stream"
  assert path(precision="tf32") == "cluster"
  assert path(fusion="step") == "step"
  assert path(batch_size=128) == "step"
  assert path(optimizer="momentum", lr=0.05) != "cluster"
  assert path(hidden=(512,)) != "cluster"
  monkeypatch.setattr(jax, "device_count", lambda: 2)  # Several GPUs: each its own 64 members
  assert path(64) == "stream"
  monkeypatch.setattr(paths, "STREAM_MEASURED", {"another GPU": (64, 128)})
  assert path(64) == "cluster"
  monkeypatch.setattr(paths, "STREAM_MEASURED", {jax.devices()[0].device_kind: (64, 128)})
  monkeypatch.setattr(stream_population_mgpu, "CHECKED", ())
  assert path(64) == "cluster"


def test_what_the_cluster_path_cannot_take_is_one_line(monkeypatch):
  """fusion="cluster" refuses float images (the kernel takes uint8 pixels as bfloat16 integers)
  and float64 params in one line, before any kernel is built."""
  from jaxshallow import population as pop
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(cluster_mlp_mgpu, "lowers", lambda: None)
  params = pop.init_params(lambda key: mlp.init_mlp(key, (784, 256, 10)), [0, 1])
  images, labels = np.zeros((70, 28, 28), np.uint8), np.zeros(70, np.int32)
  orders, lrs = np.stack([np.arange(70)] * 2).astype(np.int32), np.full(2, 0.1, np.float32)
  run = lambda p, x: pop._epoch(p, None, jnp.asarray(x), jnp.asarray(labels), jnp.asarray(orders),
                                jnp.asarray(lrs), optimizer="sgd", momentum=0.9, batch_size=64,
                                impl="pallas", fusion="cluster")
  with pytest.raises(ValueError, match="it takes uint8 pixels, not float32") as e:
    run(params, images.astype(np.float32))
  assert "\n" not in str(e.value)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), params)
    with pytest.raises(ValueError, match="float32, not float64") as e:
      run(p64, images)
  assert "\n" not in str(e.value)


def test_softmax_regression_population_gives_each_member_its_own_run(monkeypatch):
  """Softmax regression's population (a CTA a member, logreg_mgpu): 5 members in chunks of 2,
  each member's params, loss and accuracy those of its own run of the kernel's twin, in float64
  within 1e-10."""
  from pallas_kernels.fused import logreg_mgpu
  monkeypatch.setattr(fused_population, "LOGREG_CHUNK", 2)
  _check_each_member_its_own_run(logreg_mgpu, (784, 10), model="logreg", seed=1, members=5,
                                 sets=5, steps=3, extra=7,
                                 lrs=np.asarray([0.01, 0.02, 0.05, 0.1, 0.03]), keys=range(5),
                                 accuracy_rtol=1e-12)


def test_softmax_regression_takes_its_one_cta_kernel_on_hopper(monkeypatch):
  """On a Hopper GPU (pretended here) softmax regression at batch 64, SGD takes logreg_mgpu at
  every precision, alone ("logreg") and as a population ("cluster"); another batch or optimizer
  the grid epoch kernel (alone) or the population kernels (a population)."""
  from jaxshallow import paths
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  cfg = config.resolve(config.Config(impl="pallas", model="logreg"))
  kernel = lambda **kw: paths._epoch_kernel_of(dataclasses.replace(cfg, **kw))
  assert kernel() == "logreg"
  assert paths.describe(paths.resolve(cfg)) == "epoch kernel (one CTA)"
  assert kernel(batch_size=128) == "grid"
  assert kernel(optimizer="momentum", lr=0.05) == "grid"
  assert kernel(precision="bfloat16") == kernel(precision="tf32") == "logreg"
  pop = lambda **kw: population_run._population_cfg(dataclasses.replace(cfg, **kw), 64).fusion
  assert pop() == "cluster"
  assert pop(batch_size=128) != "cluster"


def test_members_that_share_a_seed_share_its_batches(monkeypatch):
  """Softmax regression's population on 3 orders for 6 members (member i on order i mod 3, as a
  grid of learning rates by seeds is laid out), in chunks of at most 4 (rounded up to whole
  periods: two chunks of 3): each member its own run of the twin on its order, in float64."""
  from pallas_kernels.fused import logreg_mgpu
  monkeypatch.setattr(fused_population, "LOGREG_CHUNK", 4)
  _check_each_member_its_own_run(logreg_mgpu, (784, 10), model="logreg", seed=2, members=6,
                                 sets=3, steps=2, extra=3,
                                 lrs=np.asarray([0.01, 0.01, 0.01, 0.05, 0.05, 0.05]),
                                 keys=[i % 3 for i in range(6)], accuracy_rtol=0)


def test_order_period():
  """The orders a population needs: one a distinct seed where seeds repeat with a period that
  divides the members (a grid of learning rates by seeds), else one a member."""
  from jaxshallow import population as pop
  assert pop.order_period([0, 1, 2, 0, 1, 2]) == 3
  assert pop.order_period([5, 5, 5, 5]) == 1
  assert pop.order_period([0, 1, 2, 3]) == 4
  assert pop.order_period([0, 1, 0, 1, 0]) == 5  # 2 does not divide 5 members
  assert pop.order_period([0, 0, 1, 1]) == 4  # not i mod U


def test_population_epoch_expands_shared_orders_for_other_paths():
  """xla's population epoch on 2 orders for 4 members equals the same epoch on the 4 orders
  written out (member i on order i mod 2); orders that do not divide the members: one line."""
  from jaxshallow import models, population as pop
  rng = np.random.default_rng(3)
  n = 2 * 64 + 3
  x = jnp.asarray(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
  y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
  params = pop.init_params(lambda key: mlp.init_mlp(key, (784, 10)), [0, 1, 0, 1])
  orders = jnp.asarray(np.stack([rng.permutation(n) for _ in range(2)]).astype(np.int32))
  lrs = jnp.asarray([0.1, 0.1, 0.05, 0.05], jnp.float32)
  kw = dict(optimizer="sgd", momentum=0.9, batch_size=64, model=models.LOGREG, fusion="xla")
  state = pop.init_opt_state("sgd", params)
  short = pop._epoch(params, state, x, y, orders, lrs, **kw)
  full = pop._epoch(params, state, x, y, orders[jnp.arange(4) % 2], lrs, **kw)
  for a, b in zip(jax.tree.leaves(short), jax.tree.leaves(full)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  with pytest.raises(ValueError, match="3 orders do not divide 4 members") as e:
    pop._epoch(params, state, x, y, jnp.concatenate([orders, orders[:1]]), lrs, **kw)
  assert "\n" not in str(e.value)
