"""A population of the reference MLP (784-256-10, batch 64, SGD lr 0.1, float32) on one GPU:
xla's vmapped step, a cluster kernel a member (fusion "cluster") and the streamed population
kernel (fusion "stream"), at several sizes, in one process: the median epoch of --epochs (after
compiling, reported apart) and the members' mean test accuracy. Each path is forced by
replacing population_run's path choice for the run. Checkout root, Hopper GPU, MNIST under
$JAXSHALLOW_DATA_DIR. Usage: stream_vs_cluster.py SIZE,SIZE,... EPOCHS"""

import dataclasses
import statistics
import sys

import jax

from jaxshallow.run import config, population_run
from pallas_kernels.fused import stream_population_mgpu

stream_population_mgpu.FASTER_THAN_XLA = True  # (this script measures whether it is)
sizes = [int(s) for s in sys.argv[1].split(",")]
epochs = int(sys.argv[2])
choose = population_run._population_cfg
force = None


def forced(cfg, per_device=32):
  cfg = choose(cfg, per_device)
  return dataclasses.replace(cfg, fusion=force) if force else cfg


population_run._population_cfg = forced
print(f"device {jax.devices()[0].device_kind}; jax {jax.__version__}; MLP 784-256-10 batch 64 "
      f"SGD lr 0.1; {epochs} epochs, median", flush=True)
for n in sizes:
  for impl, force in (("xla", None), ("pallas", "cluster"), ("pallas", "stream")):
    base = config.Config(model="mlp", impl=impl, epochs=epochs, lr=0.1)
    r = population_run.run(base, list(range(n)), [0.1], log=lambda s: None)
    epoch_s = statistics.median(r["epoch_time_s"])
    acc = [m["test_accuracy"] for m in r["members"] if not m["diverged"]]
    print(f"members {n:4d}  {impl:6s} {force or '':8s} epoch {1e3 * epoch_s:8.1f} ms  "
          f"{n / epoch_s:7.0f} networks/s  compile {r['compile_time_s']:5.1f} s  "
          f"acc {100 * sum(acc) / max(len(acc), 1):.2f} % ({n - len(acc)} diverged)", flush=True)
