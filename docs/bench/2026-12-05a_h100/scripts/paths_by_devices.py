"""A population of the reference MLP (784-256-10, batch 64, SGD lr 0.1, float32) with each path
forced (xla's vmapped step, a cluster kernel a member, the streamed population kernel) at
several sizes on D devices of one host (the members split over them under shard_map), in one
process: the median epoch of EPOCHS (compile reported apart), networks/s and the members' mean
test accuracy. Checkout root, Hopper GPUs, MNIST under $JAXSHALLOW_DATA_DIR.
Usage: paths_by_devices.py SIZE,SIZE,... DEVICES,DEVICES,... EPOCHS [PATH,PATH,...]"""

import dataclasses
import statistics
import sys

import jax

from jaxshallow.run import config, population_run

sizes = [int(s) for s in sys.argv[1].split(",")]
counts = [int(d) for d in sys.argv[2].split(",")]
epochs = int(sys.argv[3])
wanted = sys.argv[4].split(",") if len(sys.argv) > 4 else ["xla", "cluster", "stream"]
choose = population_run._population_cfg
force = None


def forced(cfg, per_device=32):
  cfg = choose(cfg, per_device)
  return dataclasses.replace(cfg, fusion=force) if force else cfg


population_run._population_cfg = forced
print(f"{jax.device_count()} x {jax.devices()[0].device_kind}; jax {jax.__version__}; MLP "
      f"784-256-10 batch 64 SGD lr 0.1; {epochs} epochs, median", flush=True)
for n in sizes:
  for d in counts:
    for name in wanted:
      impl, force = ("xla", None) if name == "xla" else ("pallas", name)
      base = config.Config(model="mlp", impl=impl, epochs=epochs, lr=0.1, devices=d)
      try:
        r = population_run.run(base, list(range(n)), [0.1], log=lambda s: None)
      except Exception as e:  # (a path that fails on D devices is a row, not the end)
        print(f"members {n:4d}  devices {d}  {name:8s} FAILED {type(e).__name__}: "
              f"{str(e).splitlines()[0][:200]}", flush=True)
        continue
      epoch_s = statistics.median(r["epoch_time_s"])
      acc = [m["test_accuracy"] for m in r["members"] if not m["diverged"]]
      print(f"members {n:4d}  devices {d}  {name:8s} epoch {1e3 * epoch_s:8.1f} ms  "
            f"{n / epoch_s:7.0f} networks/s  compile {r['compile_time_s']:5.1f} s  "
            f"acc {100 * sum(acc) / max(len(acc), 1):.2f} % ({n - len(acc)} diverged)",
            flush=True)
