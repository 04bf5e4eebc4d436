"""The breadth grid: the networks a user trains, each one setting away from a workload's
reference, named in one place so that one point or all can be run.

  python -m benchmarks.bench --grid                       # every point, xla beside pallas
  python -m benchmarks.bench --grid --points="mlp hidden 1024,mlp hidden 256-1024-256"
  python -m benchmarks.bench --grid --quick               # tiny shapes: a check on the CPU
  python -m experiments.parity --reference=float64 --point="mlp hidden 1024"

The MLP's reference is 784-256-10 on MNIST, batch 64, plain SGD at lr 0.5, float32, 10 epochs;
the CNN's and the regression net's are their workloads' (WORKLOADS.md). Where a change needs
another learning rate (momentum, Adam, the wide and deep MLPs), the point says which. Names
join a network's hidden widths with "-", so that a comma always separates two names.
"""

from __future__ import annotations

import dataclasses

from jaxshallow.run import config


@dataclasses.dataclass(frozen=True)
class Point:
  name: str
  settings: tuple  # (field, value) pairs of a Config: the point's changes from the reference

  def config(self, **more) -> config.Config:
    return config.Config(**dict(self.settings), **more)


def _point(name, **settings) -> Point:
  return Point(name, tuple(sorted(settings.items())))


MLP, CNN = dict(model="mlp"), dict(model="cnn")
REGRESSION = dict(model="regression", dataset="large")
GRID = [
    _point("mlp reference", **MLP),
    *[_point(f"mlp hidden {h}", **MLP, hidden=(h,)) for h in (128, 512, 1024)],
    _point("mlp hidden 2048", **MLP, hidden=(2048,), lr=0.1),
    _point("mlp hidden 512-256", **MLP, hidden=(512, 256), lr=0.1),
    _point("mlp hidden 256-256", **MLP, hidden=(256, 256), lr=0.1),
    _point("mlp hidden 256-1024-256", **MLP, hidden=(256, 1024, 256), lr=0.1),
    *[_point(f"mlp batch {b}", **MLP, batch_size=b) for b in (16, 32, 128, 256, 512)],
    _point("mlp momentum", **MLP, optimizer="momentum", lr=0.05),
    _point("mlp adam", **MLP, optimizer="adam", lr=1e-3),
    _point("mlp tf32", **MLP, precision="tf32"),
    _point("mlp bfloat16", **MLP, precision="bfloat16"),
    _point("softmax regression", model="logreg"),
    *[_point(f"regression {size}", model="regression", dataset=size)
      for size in ("small", "medium", "large")],
    *[_point(f"regression hidden {'-'.join(map(str, h))}", **REGRESSION, hidden=h)
      for h in ((128,), (1024,), (256, 256), (256, 1024, 256))],
    _point("cnn reference", **CNN),
    *[_point(f"cnn batch {b}", **CNN, batch_size=b) for b in (32, 128, 256)],
    _point("cnn sgd", **CNN, optimizer="sgd"),
    _point("cnn adam", **CNN, optimizer="adam", lr=1e-3),
    _point("cnn tf32", **CNN, precision="tf32"),
]
BY_NAME = {p.name: p for p in GRID}

# Tiny forms for a structural check on the CPU (Pallas in interpret mode): a few steps of one
# epoch, widths cut down; the point's other changes stay.
QUICK = {"mlp": dict(train_limit=256, test_limit=100, epochs=1),
         "logreg": dict(train_limit=256, test_limit=100, epochs=1),
         "cnn": dict(train_limit=64, test_limit=50, epochs=1),
         "regression": dict(dataset="small", epochs=1)}


def points(names) -> list[Point]:
  """The points named (all if none); ValueError (one line) for a name not in the grid."""
  if not names:
    return list(GRID)
  unknown = [n for n in names if n not in BY_NAME]
  if unknown:
    raise ValueError(f"unknown grid points {', '.join(map(repr, unknown))}; the points are: "
                     f"{', '.join(BY_NAME)}")
  return [BY_NAME[n] for n in names]


def config_of(point: Point, impl: str, quick: bool = False, **more) -> config.Config:
  """The point's Config for ``impl``, resolved; ``quick``: its tiny form."""
  cfg = point.config(impl=impl, **more)
  if quick:
    small = dict(QUICK[cfg.model])
    if cfg.model == "regression" or cfg.model == "mlp":
      small["hidden"] = tuple(max(8, h // 16) for h in cfg.hidden)
    if cfg.batch_size and cfg.batch_size > small.get("train_limit", 256):
      small["train_limit"] = cfg.batch_size
    cfg = dataclasses.replace(cfg, **small)
  return config.resolve(cfg)
