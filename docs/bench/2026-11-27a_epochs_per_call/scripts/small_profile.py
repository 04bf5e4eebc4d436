"""Where one call of the regression net's small set (100 epochs of 1 step) goes: wall of a call
(dispatch to losses on the host), the GPU kernels' sum, the largest kernels. xla and pallas."""
import statistics, sys, time
import numpy as np
from benchmarks import kernel_times
from jaxshallow import paths
from jaxshallow.run import config, runner, trainers
for dataset in sys.argv[1].split(","):
  for impl in ("xla", "pallas"):
    cfg = paths.resolve(config.resolve(config.Config(impl=impl, model="regression", dataset=dataset, compilation_cache="off")))
    ds = runner.load_data(cfg)
    t = trainers.make_trainer(cfg, ds)
    t.compile()
    k = t.epochs_per_call
    run = lambda: [np.asarray(v) for v in t.start_epochs(range(0, k))]
    run()
    walls = []
    for _ in range(15):
      t0 = time.perf_counter(); run(); walls.append(time.perf_counter() - t0)
    prof = kernel_times.profiled_kernels(run)
    total = sum(sum(v) for v in prof.values())
    top = sorted(prof.items(), key=lambda kv: -sum(kv[1]))[:6]
    print(f"{dataset} {impl} ({paths.describe(cfg)}), {k} epochs a call: wall median {1e3 * statistics.median(walls):.3f} ms, "
          f"GPU kernels {total / 1e3:.3f} ms in {sum(len(v) for v in prof.values())} launches")
    for name, v in top:
      print(f"   {sum(v) / 1e3:8.3f} ms  {len(v):5d} x  {name[:90]}")
