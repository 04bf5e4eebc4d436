"""Which Pallas kernels train a network: every choice between paths, in one place.

The kernels' modules say what each path can train (their ``problem()`` checks); this module
picks, among the paths that can, the one to take, and says why in one line. The paths of
``--impl=pallas``, from the most general to the most fused:

  ops       the op kernels (``pallas_kernels.ops``) under ``jax.grad``, optax's update, one step
            per iteration of a ``lax.scan``: any network, any optimizer
  step      the CNN's step kernels (``jaxshallow.fused.step``): a step of Pallas kernels alone
  epoch     the MLP family's whole epoch in one launch (``jaxshallow.fused.epoch``): on a Hopper
            GPU clusters (``cluster_mlp_mgpu``, ``cluster_epoch_mgpu``), a phase kernel
            (``grid_regression_mgpu``, ``tile_regression_mgpu``, ``tile_mlp_mgpu``) or one CTA
            (``logreg_mgpu``), else a grid of programs at grid barriers (``mlp_epoch``)
  xla       no Pallas kernel: the xla impl's step, where every Pallas path measured slower
            than XLA on this network (``MEASURED``), so that the default is never slower

(inside the op kernels, per layer, ``ops.dense_on_hopper`` and ``ops.fused_head`` pick the
kernels). Populations: ``population``. Each rule below was measured (docs/design/ has the
figures). Where this jax has no Pallas Triton backend (``backends``), xla's path replaces a
Triton one.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import NamedTuple

import jax

from jaxshallow import backends, synthetic
from jaxshallow.fused import epoch as fused_epoch, population as fused_population
from jaxshallow.fused import step as fused_step

log = logging.getLogger("jaxshallow")


class Path(NamedTuple):
  fusion: str  # train_epoch's: ops, step, epoch or xla; a population's also cluster or stream
  why: str  # One line: why this path (empty where it is the model's own default).


def widths(cfg) -> tuple[int, ...]:
  """The MLP family's layer widths before the data are loaded: 28 x 28 images and 10 classes,
  or the synthetic regression's inputs and one output."""
  if cfg.model == "regression":
    return (synthetic.DIM, *cfg.hidden, 1)
  return (28 * 28, *cfg.hidden, 10)


def default_fusion(model: str) -> str:
  """The fused path a model takes where it can: the epoch kernels for the MLP family, the
  step kernels for the CNN."""
  if model in fused_epoch.MODELS:
    return "epoch"
  return "step" if model in fused_step.MODELS else "ops"


# The op kernels trained faster than the grid epoch kernel above this many multiply-adds a
# program in a pass, slower below it (docs/design/epoch_kernels.md).
OPS_FASTER_ABOVE = 3.5e5
# Where the breadth grid (benchmarks.grid, --alternatives) measured another path faster than
# the rule above: (widths, batch size, optimizer, precision) -> fusion; "xla" where every Pallas
# path trained slower than xla (figures below; runs in docs/bench/); "mosaic": the epoch path
# where a Mosaic GPU epoch kernel (``backends.MOSAIC_EPOCH_KERNELS``) takes it (Hopper), else xla.
MEASURED = {
    # Over the work rule's limit: 784-1024-10 the cluster kernel on Hopper (3.96x), else the grid
    # kernel, 1.55x (H100); 784-256-1024-256-10 the tile kernel on Hopper, else the grid kernel.
    ((784, 1024, 10), 64, "sgd", "float32"): "epoch",
    ((784, 256, 1024, 256, 10), 64, "sgd", "float32"): "epoch",
    # 784-2048-10: the cluster kernel without clusters on Hopper (cluster_mlp_mgpu._flat),
    # elsewhere xla (the op kernels 0.85x, the grid kernel 0.55x, 2026-11-26).
    ((784, 2048, 10), 64, "sgd", "float32"): "mosaic",
    # 32-256-256-1: the phase kernel on Hopper (grid_regression_mgpu), 2.22x on the H100
    # (2026-12-07); elsewhere xla (the grid kernel 0.70x, the op kernels 0.42x, 2026-11-26).
    ((synthetic.DIM, 256, 256, 1), 256, "sgd", "float32"): "mosaic",
    # 32-256-1024-256-1: the tile kernel on Hopper (tile_regression_mgpu), 1.23x on the H100
    # (2026-12-07); elsewhere xla (the op kernels 0.37x, the grid kernel 0.20x).
    ((synthetic.DIM, 256, 1024, 256, 1), 256, "sgd", "float32"): "mosaic",
}


def problem(cfg, fusion: str) -> str | None:
  """Why ``fusion`` cannot train ``cfg`` (one line), or None if it can."""
  if fusion in ("ops", "xla"):
    return None
  if fusion == "epoch":
    why = fused_epoch.problem(cfg.model, widths(cfg)[-1], cfg.batch_size, cfg.optimizer)
  elif fusion == "step":
    why = fused_step.problem(cfg.model, cfg.optimizer)
  else:
    raise ValueError(f"fusion must be ops, epoch, step or xla, got {fusion!r}")
  if why is None and cfg.dispatch != "scan":
    why = f"--dispatch={cfg.dispatch} runs one step per call"
  if why is None and cfg.data_parallel:
    why = "--data_parallel splits each step over devices"
  if why is None and cfg.blocks is not None:
    why = "--blocks sets the op kernels' block sizes"
  return why


def single(cfg) -> Path:
  """The path that trains ``cfg`` (a resolved Config of ``impl="pallas"``): ``cfg.fusion``
  where it can train it, else the op kernels with a one-line notice; by default (``fusion``
  None) the model's fused path where it can and where it measured faster."""
  wanted = cfg.fusion or default_fusion(cfg.model)
  if cfg.fusion in ("ops", "xla"):
    return Path(cfg.fusion, "")
  measured = MEASURED.get((widths(cfg), cfg.batch_size, cfg.optimizer, cfg.precision))
  if measured == "mosaic":  # The epoch path where a Mosaic GPU kernel takes it, else xla
    measured = "epoch" if _epoch_kernel_of(cfg) in backends.MOSAIC_EPOCH_KERNELS else "xla"
  if cfg.fusion is None and measured == "xla" and cfg.blocks is None:
    why = "every Pallas path trained this network slower than xla (jaxshallow.paths.MEASURED)"
    log.warning("training with XLA's own fusions (--fusion=xla): %s; --fusion=ops or epoch "
                "to use the Pallas kernels anyway", why)
    return Path("xla", why)
  if wanted == "ops":
    return Path("ops", "the model has no fused path")
  why = problem(cfg, wanted)
  if why:
    log.warning("--fusion=%s cannot train this (%s): using the op kernels (--fusion=ops)",
                wanted, why)
    return Path("ops", f"the {wanted} kernels cannot train this: {why}")
  if cfg.fusion is None and measured:
    return Path(measured, "measured faster on this network (jaxshallow.paths.MEASURED)")
  if cfg.fusion is None and wanted == "epoch" and _epoch_kernel_of(cfg) == "grid":
    work = fused_epoch.work_per_program(widths(cfg), cfg.batch_size)
    if work > OPS_FASTER_ABOVE:
      why = (f"at batch {cfg.batch_size} each of the epoch kernel's programs would run "
             f"{work:.1e} multiply-adds a pass, where the op kernels were faster")
      log.warning("using the op kernels (--fusion=ops): %s (--fusion=epoch to use it anyway)",
                  why)
      return Path("ops", why)
  return Path(wanted, "")


def ops_impl(cfg) -> str:
  """The impl whose ops the steps call: xla's on the xla path (every dispatch), else cfg.impl's."""
  return "xla" if cfg.fusion == "xla" else cfg.impl


def backend(cfg) -> str:
  """What a resolved pallas Config's path lowers through (``backends.of_path``)."""
  return backends.of_path(cfg.fusion, _epoch_kernel_of(cfg) if cfg.fusion == "epoch" else None)


def eval_impl(cfg) -> str:
  """The evaluation's: xla's ops where the training runs no Triton kernel, else cfg.impl's."""
  return "xla" if cfg.impl == "pallas" and backend(cfg) != "triton" else cfg.impl


def _without_triton(cfg, mosaic) -> Path:
  """A jax without Pallas' Triton backend: ``mosaic`` (the Mosaic GPU path that takes it, or
  False) unless another was asked for, else xla's; a Triton path asked for is refused."""
  asked = "ops (--blocks)" if cfg.blocks is not None else cfg.fusion
  if asked == "xla" or (mosaic and asked in (None, "epoch")):
    return Path(asked or mosaic, "")
  log.warning("training with XLA's own fusions (--fusion=xla): %s", why := backends.missing(asked))
  return Path("xla", why)


def resolve(cfg):
  """``cfg`` with ``fusion`` set to the path that trains it (pallas; other impls unchanged)."""
  if cfg.impl != "pallas":
    return cfg
  if backends.triton_state() == "removed":  # A Mosaic GPU epoch kernel where it would be taken
    measured = MEASURED.get((widths(cfg), cfg.batch_size, cfg.optimizer, cfg.precision))
    mosaic = (cfg.model in fused_epoch.MODELS and problem(cfg, "epoch") is None
              and _epoch_kernel_of(cfg) in backends.MOSAIC_EPOCH_KERNELS
              and not (cfg.fusion is None and measured == "xla"))
    return dataclasses.replace(cfg, fusion=_without_triton(cfg, mosaic and "epoch").fusion)
  return dataclasses.replace(cfg, fusion=single(cfg).fusion)


def _epoch_kernel_of(cfg) -> str:
  """``epoch_kernel`` of a Config's network."""
  return epoch_kernel(widths(cfg), cfg.batch_size,
                      head="mse" if cfg.model == "regression" else "xent", bias=cfg.bias,
                      optimizer=cfg.optimizer, precision=cfg.precision, dtype="float32")


def describe(cfg) -> str:
  """The kernels that train ``cfg`` (resolved, its path set by ``resolve``), in words."""
  if cfg.impl != "pallas":
    return cfg.impl
  if cfg.fusion == "epoch":
    names = {"grid": "epoch kernel (grid)", "logreg": "epoch kernel (one CTA)",
             "grid_regression": "phase kernel (64 CTAs)", "tile_mlp": "phase kernel (132 CTAs)",
             "tile_regression": "phase kernel (128 CTAs)"}
    return names.get(_epoch_kernel_of(cfg), "cluster kernel")
  if cfg.fusion == "xla" and backends.triton_state() == "removed":
    return "xla (no Pallas Triton backend)"
  return {"step": "step kernels" if cfg.model == "cnn" else "population step kernels",
          "ops": "op kernels", "xla": "xla (no Pallas kernel faster)",
          "cluster": "cluster kernel a member", "stream": "streamed population kernel"}[cfg.fusion]


def epoch_kernel(widths, batch_size: int, *, head: str, bias: bool, optimizer: str,
                 precision: str, dtype) -> str:
  """Which epoch kernel trains this network: on Hopper "cluster_mlp" or "cluster_epoch"
  (thread-block clusters), "grid_regression" (32-256-256-1, 64 CTAs), "tile_regression"
  (32-256-1024-256-1, 128 CTAs), "tile_mlp" (784-256-1024-256-10, 132 CTAs) or "logreg"
  (softmax regression, one CTA) where one takes it, else "grid" (``mlp_epoch``). The regression
  nets' cluster kernel only in float32 (at tf32 and bfloat16 the grid kernel was as fast); the
  MLP's at every precision, with a jax whose Mosaic GPU compiles it."""
  from pallas_kernels.fused import (cluster_epoch_mgpu, cluster_mlp_mgpu, grid_regression_mgpu,
                                    logreg_mgpu, tile_mlp_mgpu, tile_regression_mgpu)
  from pallas_kernels.ops import dense_mgpu
  if not dense_mgpu.on_hopper():
    return "grid"
  net = dict(bias=bias, optimizer=optimizer, dtype=dtype)
  if head == "mse" and precision == "float32":  # The regression nets' Mosaic GPU kernels
    for name, kernel in (("cluster_epoch", cluster_epoch_mgpu),
                         ("grid_regression", grid_regression_mgpu),
                         ("tile_regression", tile_regression_mgpu)):
      if kernel.problem(widths, batch_size, **net) is None:
        return name
  if (head == "xent" and precision == "float32"
      and tile_mlp_mgpu.problem(widths, batch_size, **net) is None):
    return "tile_mlp"
  if (head == "xent" and cluster_mlp_mgpu.lowers() is None
      and cluster_mlp_mgpu.problem(widths, batch_size, wide=True, **net) is None):
    return "cluster_mlp"
  # Softmax regression's one-CTA kernel trained faster than the grid kernel at every precision
  # on the H100 (float32 4.53 against 5.07 ms an epoch; docs/design/cluster_kernels.md).
  if head == "xent" and logreg_mgpu.problem(widths, batch_size, **net) is None:
    return "logreg"
  return "grid"


# Below this many members a device the op kernels under vmap beat the population step kernels.
STEP_KERNELS_FROM = 32
# On an H200 both were slower than xla at 8 and 64 members off the reference MLP (momentum, Adam,
# hidden 128 or 512, batch 128: 0.56x-0.96x; but ops 1.07x at 8 of hidden 128; populations.md).
SLOWER_THAN_XLA = "the Pallas op and population step kernels trained populations slower than xla"


def population(cfg, per_device: int) -> Path:
  """The path of a population of ``cfg`` (pallas), ``per_device`` members a device: on Hopper,
  for the reference MLP, the streamed kernel (``STREAM_MEASURED``) or a cluster a member
  (softmax regression a CTA a member); the CNN its step kernels under vmap; else on a GPU xla
  (``SLOWER_THAN_XLA``), on the CPU the population step kernels from ``STEP_KERNELS_FROM``
  members a device, else the op kernels. ``--fusion=ops``, ``step``, ``epoch`` ask."""
  if backends.triton_state() != "removed":
    return _population(cfg, per_device)
  w = widths(cfg)  # A streamed or a cluster (CTA) kernel a member where one takes it
  fits = fused_population.cluster_problem(cfg.model, w, cfg.optimizer, cfg.batch_size,
                                          bool(cfg.bias)) is None
  return _without_triton(cfg, fits and ("stream" if _streams(cfg, w, per_device) else "cluster"))


# Members a device where the streamed kernel beat a cluster a member, by GPU (populations.md).
STREAM_MEASURED = {"NVIDIA H200": (64, 128, 256, 512),
                   "NVIDIA H100 80GB HBM3": (64, 128, 256, 512)}


def _streams(cfg, w, per_device: int) -> bool:
  sizes = STREAM_MEASURED.get(jax.devices()[0].device_kind, ())
  return (per_device in sizes and cfg.precision == "float32"
          and fused_population.stream_problem(cfg.model, w, cfg.optimizer, cfg.batch_size,
                                              bool(cfg.bias)) is None)


def _population(cfg, per_device: int) -> Path:
  if cfg.fusion in ("ops", "xla"):
    return Path(cfg.fusion, "")
  w = widths(cfg)
  if cfg.fusion in (None, "epoch") and cfg.blocks is None:
    why = fused_population.cluster_problem(cfg.model, w, cfg.optimizer, cfg.batch_size,
                                           bool(cfg.bias))
    if why is None:
      return Path("stream" if _streams(cfg, w, per_device) else "cluster", "")
    if cfg.fusion == "epoch":
      log.warning("the cluster kernel cannot train this population (%s): trying the "
                  "population step kernels", why)
  if (cfg.fusion is None and cfg.blocks is None and cfg.model != "cnn"
      and jax.default_backend() == "gpu"):
    log.warning("a population of this network trains with xla's ops (%s; --fusion=ops or step "
                "to use them anyway)", SLOWER_THAN_XLA)
    return Path("xla", SLOWER_THAN_XLA)
  kernels = "CNN's step kernels" if cfg.model == "cnn" else "population step kernels"
  if cfg.blocks is not None:
    why = "--blocks sets the op kernels' block sizes"
  elif cfg.model == "cnn":
    why = fused_step.problem(cfg.model, cfg.optimizer)
  else:
    why = fused_population.problem(cfg.model, len(w) - 1, cfg.optimizer, cfg.batch_size, w[-1],
                                   has_bias=bool(cfg.bias))
  if why:
    log.warning("a population of this network runs the Pallas op kernels under vmap (the %s "
                "need what is missing here: %s)", kernels, why)
    return Path("ops", why)
  if cfg.model == "cnn":
    return Path("step", "")
  if cfg.fusion is None and per_device < STEP_KERNELS_FROM:
    why = (f"{per_device} members a device run the Pallas op kernels under vmap, faster than "
           f"the population step kernels below {STEP_KERNELS_FROM}")
    log.warning("%s (--fusion=step to use them anyway)", why)
    return Path("ops", why)
  return Path("step", "")
