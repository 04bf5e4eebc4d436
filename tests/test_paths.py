"""jaxshallow.paths: which Pallas kernels train a network, and the one-line notices where the
asked-for path cannot."""

import logging

import jax
import jax.numpy as jnp
import pytest

from jaxshallow import ops, paths
from jaxshallow.run import config, population_run
from pallas_kernels.fused import cluster_epoch_mgpu, cluster_mlp_mgpu
from pallas_kernels.ops import dense_mgpu


def pick(**kw):
  return paths.single(config.resolve(config.Config(impl="pallas", **kw))).fusion


def test_default_fusion_is_the_faster_one(caplog):
  """--impl=pallas without --fusion: the epoch kernel where it measured faster, the op kernels
  with a one-line notice where they did (the MLP at batch 256), the same on every machine."""
  assert pick(model="mlp") == "epoch"
  assert pick(model="logreg") == "epoch"
  assert pick(model="regression", dataset="large") == "epoch"
  assert not caplog.records
  assert pick(model="mlp", batch_size=256) == "ops"
  assert len(caplog.records) == 1 and "--fusion=epoch to use it anyway" in caplog.text
  assert pick(model="mlp", batch_size=256, fusion="epoch") == "epoch"  # Asked for: kept.


def test_measured_choices_come_before_the_rule(caplog):
  """Where the grid measured every Pallas path slower than xla (784-2048-10 at batch 64), xla's
  step, with a one-line notice; a path asked for is kept; where it measured the epoch kernel
  faster beyond the work rule's limit (784-1024-10), the epoch kernel; at batch 128 the rule
  again."""
  assert pick(model="mlp", hidden=(2048,)) == "xla"  # (off Hopper: see below)
  assert len(caplog.records) == 1 and "--fusion=xla" in caplog.text
  assert pick(model="mlp", hidden=(2048,), fusion="epoch") == "epoch"
  assert pick(model="regression", dataset="large", hidden=(256, 256)) == "xla"
  assert pick(model="mlp", hidden=(1024,)) == "epoch"
  assert pick(model="mlp", hidden=(1024,), batch_size=128) == "ops"


def test_the_xla_path_is_the_xla_impl():
  """pallas on its xla path trains exactly as --impl=xla: the same losses, bit for bit."""
  from jaxshallow.run import runner
  small = dict(model="regression", dataset="small", hidden=(8,), epochs=2, train_limit=512,
               test_limit=64)
  xla = runner.run(config.Config(impl="xla", **small), log=lambda _: None)
  pallas = runner.run(config.Config(impl="pallas", fusion="xla", **small), log=lambda _: None)
  assert pallas["path"] == "xla (no Pallas kernel faster)" and pallas["fusion"] == "xla"
  assert pallas["epoch_loss"] == xla["epoch_loss"]
  assert pallas["final_mse"] == xla["final_mse"]  # The evaluation too runs xla's ops.
  loop = runner.run(config.Config(impl="pallas", fusion="xla", dispatch="loop", **small),
                    log=lambda _: None)
  assert loop["epoch_loss"] == runner.run(config.Config(impl="xla", dispatch="loop", **small),
                                          log=lambda _: None)["epoch_loss"]


def test_the_xla_path_is_not_taken_with_block_sizes():
  assert pick(model="mlp", hidden=(1024,), blocks="16,16,64") == "ops"
  with pytest.raises(config.ConfigError, match="--fusion=xla runs none"):
    config.resolve(config.Config(impl="pallas", fusion="xla", blocks="16,16,64"))


def test_the_cnn_takes_the_step_kernels_by_default(caplog):
  assert pick(model="cnn") == "step"
  assert pick(model="cnn", fusion="ops") == "ops"
  assert not caplog.records
  assert pick(model="cnn", optimizer="adam", lr=1e-3) == "step"
  assert pick(model="mlp", fusion="step") == "ops"
  assert len(caplog.records) == 1 and "--fusion=step cannot train this" in caplog.text


def test_resolve_sets_the_path_once():
  """paths.resolve fills in pallas' fusion (a resolved path passes unchanged, with no second
  notice); other impls keep theirs."""
  cfg = paths.resolve(config.resolve(config.Config(impl="pallas", model="cnn")))
  assert cfg.fusion == "step" and paths.resolve(cfg) == cfg
  xla = config.resolve(config.Config(impl="xla"))
  assert paths.resolve(xla).fusion is None


@pytest.mark.parametrize("over,per_device,fusion,notice", [
    ({}, 64, "step", None),
    ({"fusion": "ops"}, 64, "ops", None),
    ({"fusion": "epoch"}, 64, "step", "the cluster kernel cannot train this population (it runs "
                                      "on Hopper GPUs only)"),
    ({"fusion": "step"}, 64, "step", None),
    ({}, 16, "ops", "faster than the population step kernels below 32"),
    ({"fusion": "step"}, 16, "step", None),
    ({"optimizer": "momentum", "lr": 0.1}, 64, "ops", "plain SGD"),
    ({"hidden": (64, 32)}, 64, "ops", "one hidden layer"),
    ({"batch_size": 256}, 64, "ops", "batches up to 128"),
    ({"blocks": "16,16,64"}, 64, "ops", "--blocks"),
])
def test_a_pallas_population_picks_the_step_kernels_where_they_fit(over, per_device, fusion,
                                                                   notice, caplog):
  cfg = config.Config(impl="pallas", model="mlp", **over)
  with caplog.at_level(logging.WARNING, logger="jaxshallow"):
    got = population_run._population_cfg(cfg, per_device)
  assert got.fusion == fusion
  said = " ".join(r.getMessage() for r in caplog.records)
  assert (notice in said) if notice else ("population" not in said)


@pytest.mark.parametrize("over,per_device,fusion", [
    ({}, 64, "xla"), ({}, 8, "xla"), ({"optimizer": "momentum", "lr": 0.05}, 64, "xla"),
    ({"model": "logreg", "hidden": ()}, 64, "xla"), ({"fusion": "ops"}, 8, "ops"),
    ({"fusion": "step"}, 64, "step"), ({"blocks": "16,16,64"}, 64, "ops"),
    ({"model": "cnn"}, 16, "step")])
def test_on_a_gpu_a_population_without_a_one_launch_kernel_trains_with_xla(
    over, per_device, fusion, monkeypatch, caplog):
  """On a GPU (pretended; not Hopper, so no cluster kernel) a population of the MLP family
  trains with xla's ops by default, the Pallas op and population step kernels having trained
  populations slower (one line says so); asked for, they still train it; the CNN keeps its step
  kernels."""
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: False)
  cfg = config.Config(impl="pallas", **{"model": "mlp", **over})
  with caplog.at_level(logging.WARNING, logger="jaxshallow"):
    got = population_run._population_cfg(cfg, per_device)
  assert got.fusion == fusion
  assert (paths.SLOWER_THAN_XLA in caplog.text) == (fusion == "xla")


def test_on_a_hopper_gpu_the_cluster_kernel_comes_before_xla(monkeypatch):
  """On a Hopper GPU (pretended) the reference MLP's population keeps a cluster a member (at a
  size the streamed kernel was not measured at); another optimizer takes xla's ops."""
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(cluster_mlp_mgpu, "lowers", lambda: None)
  pick = lambda **kw: population_run._population_cfg(config.Config(impl="pallas", **kw), 8)
  assert pick().fusion == "cluster"
  assert pick(optimizer="momentum", lr=0.05).fusion == "xla"


@pytest.mark.parametrize("over,fusion,notice", [
    ({}, "step", None), ({"optimizer": "sgd"}, "step", None), ({"fusion": "ops"}, "ops", None),
    ({"optimizer": "adam", "lr": 1e-3}, "step", None)])
def test_a_cnn_population_takes_its_step_kernels(over, fusion, notice, caplog):
  cfg = config.Config(impl="pallas", model="cnn", **over)
  with caplog.at_level(logging.WARNING, logger="jaxshallow"):
    assert population_run._population_cfg(cfg, 4).fusion == fusion
  assert (notice in caplog.text) if notice else not caplog.records


def test_xla_population_has_no_fusion():
  assert population_run._population_cfg(config.Config(impl="xla")).fusion is None


def test_the_cpu_keeps_the_grid_kernel():
  """The cluster kernels run only on a Hopper GPU (at any precision for the MLP's)."""
  assert not dense_mgpu.on_hopper()  # No Hopper GPU in CI.
  regression = dict(bias=False, optimizer="sgd", dtype=jnp.float32)
  assert cluster_epoch_mgpu.problem((32, 256, 1), 256, **regression) is None
  assert paths.epoch_kernel((32, 256, 1), 256, head="mse", precision="float32",
                            **regression) == "grid"
  mlp = dict(head="xent", bias=True, optimizer="sgd", dtype=jnp.float32)
  assert paths.epoch_kernel((784, 256, 10), 64, precision="float32", **mlp) == "grid"


def test_dense_on_hopper_from_its_rows():
  """The dense layer's Hopper tiles: tf32 and float32 from HOPPER_DENSE_FROM_ROWS rows (in
  interpret mode too, so that the CPU tests run the path around the kernel's twin), never in
  bfloat16, with forced blocks or with W stored transposed."""
  rows = ops.HOPPER_DENSE_FROM_ROWS
  on = lambda m=rows, precision="float32", blocks=None, w_t=False, interpret=True: (
      ops.dense_on_hopper(m, 784, 256, precision, blocks, w_t, interpret))
  assert on() and on(precision="tf32")
  assert not on(m=rows - 8) and not on(precision="bfloat16")
  assert not on(blocks=(("block_m", 16),)) and not on(w_t=True)
  assert not on(interpret=False)  # Compiled, on the CPU: no Hopper GPU here.


@pytest.mark.parametrize("hidden,batch,optimizer,kernel", [
    (256, 64, "sgd", "cluster_mlp"), (128, 64, "sgd", "cluster_mlp"),
    (300, 64, "sgd", "cluster_mlp"), (1024, 64, "sgd", "cluster_mlp"),
    (1792, 64, "sgd", "cluster_mlp"), (2048, 64, "sgd", "cluster_mlp"),
    (2304, 64, "sgd", "grid"), (2048, 128, "sgd", "grid"),
    (512, 128, "sgd", "cluster_mlp"), (256, 256, "sgd", "cluster_mlp"),
    (256, 512, "sgd", "cluster_mlp"), (512, 512, "sgd", "grid"), (256, 1024, "sgd", "grid"),
    (512, 64, "momentum", "grid")])
def test_on_hopper_the_cluster_kernel_takes_one_hidden_layer_up_to_seven_clusters(
    hidden, batch, optimizer, kernel, monkeypatch):
  """On Hopper the MLP's cluster kernel takes 784-H-10 at batch 64, 128 and 256 (where this jax
  was checked: ``checked_batches``) with plain SGD for H up to 7 x 256 (several clusters; other
  widths padded), at batch 64 up to 8 x 256 (without clusters), and at batch 512 up to 256
  units, the grid kernel the rest."""
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(cluster_mlp_mgpu, "checked_batches", lambda: cluster_mlp_mgpu.BATCHES)
  monkeypatch.setattr(cluster_mlp_mgpu, "_jax_version", lambda: (0, 11))  # (2048: checked there)
  mlp = dict(head="xent", bias=True, optimizer=optimizer, dtype=jnp.float32)
  assert paths.epoch_kernel((784, hidden, 10), batch, precision="float32", **mlp) == kernel
  # With a jax whose passes were not checked on a GPU, batch 64 only.
  monkeypatch.setattr(cluster_mlp_mgpu, "checked_batches", lambda: (64,))
  want = kernel if batch == 64 else "grid"
  assert paths.epoch_kernel((784, hidden, 10), batch, precision="float32", **mlp) == want


def test_the_work_rule_is_the_grid_kernels(monkeypatch, caplog):
  """The op kernels' rule (OPS_FASTER_ABOVE) judges the grid kernel's programs: a network the
  cluster kernel takes keeps the epoch path at any width (784-1536-10: op kernels on the CPU,
  the cluster kernel on Hopper)."""
  assert pick(model="mlp", hidden=(1536,)) == "ops"
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  caplog.clear()
  assert pick(model="mlp", hidden=(1536,)) == "epoch"
  assert not caplog.records


def test_784_2048_10_takes_the_cluster_kernel_on_hopper_only(monkeypatch):
  """Its measured choice ("mosaic"): on Hopper the epoch path (the cluster kernel without
  clusters), elsewhere xla's step (every Pallas path there slower)."""
  assert pick(model="mlp", hidden=(2048,)) == "xla"
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(cluster_mlp_mgpu, "_jax_version", lambda: (0, 11))
  assert pick(model="mlp", hidden=(2048,)) == "epoch"
  monkeypatch.setattr(cluster_mlp_mgpu, "_jax_version", lambda: (0, 10))  # Not checked there
  assert pick(model="mlp", hidden=(2048,)) == "xla"


def test_32_256_256_1_takes_the_phase_kernel_on_hopper_only(monkeypatch):
  """Its measured choice ("mosaic"): on Hopper the epoch path (the phase kernel,
  grid_regression_mgpu), elsewhere xla's step (the grid kernel and the op kernels slower)."""
  net = dict(model="regression", dataset="large", hidden=(256, 256))
  assert pick(**net) == "xla"
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(jax, "__version__", "0.10.2")  # Not checked on a GPU there
  assert pick(**net) == "xla"
  monkeypatch.setattr(jax, "__version__", "0.12.0")
  assert pick(**net) == "epoch"
  mse = dict(head="mse", bias=False, optimizer="sgd", dtype=jnp.float32)
  assert paths.epoch_kernel((32, 256, 256, 1), 256, precision="float32", **mse) == (
      "grid_regression")
  assert paths.epoch_kernel((32, 256, 256, 1), 256, precision="tf32", **mse) == "grid"


def test_32_256_1024_256_1_takes_the_tile_kernel_on_hopper(monkeypatch):
  """Its measured choice ("mosaic": the tile kernel 1.23x on the H100, 2026-12-07): on Hopper,
  with a jax it was checked with on a GPU (0.11, 0.12), the epoch path (tile_regression_mgpu);
  elsewhere xla's step (the grid kernel and the op kernels slower)."""
  net = dict(model="regression", dataset="large", hidden=(256, 1024, 256))
  assert pick(**net) == "xla"
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(jax, "__version__", "0.11.2")
  assert pick(**net) == "epoch"
  mse = dict(head="mse", bias=False, optimizer="sgd", dtype=jnp.float32)
  widths = (32, 256, 1024, 256, 1)
  assert paths.epoch_kernel(widths, 256, precision="float32", **mse) == "tile_regression"
  assert paths.epoch_kernel(widths, 128, precision="float32", **mse) == "grid"
  monkeypatch.setattr(jax, "__version__", "0.12.1")  # In its CHECKED since 2026-12-07g
  assert pick(**net) == "epoch"
  monkeypatch.setattr(jax, "__version__", "0.10.2")  # Not in its CHECKED
  assert pick(**net) == "xla"
