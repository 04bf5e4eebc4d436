"""#54: where a warm run of the MLP's pallas training goes, phase by phase, in a fresh process.
args: lane|warpgroup|xla cache_dir. Prints one line of seconds from the process's start."""
import time
T0 = time.perf_counter()
import sys
marks = {}
def mark(name):
  marks[name] = time.perf_counter() - T0
import jax, numpy as np
mark("import jax")
from jaxshallow import compile_cache, paths
from jaxshallow.run import config, runner, trainers
mark("import jaxshallow")
variant, cache = sys.argv[1], sys.argv[2]
if variant != "xla":
  from jax.experimental.pallas import mosaic_gpu as plgpu
  from pallas_kernels.fused import cluster_mlp_mgpu
  sem = plgpu.LoweringSemantics.Lane if variant == "lane" else plgpu.LoweringSemantics.Warpgroup
  cluster_mlp_mgpu.semantics = lambda: sem
cfg = paths.resolve(config.resolve(config.Config(impl="xla" if variant == "xla" else "pallas",
                                                 model="mlp", compilation_cache=cache)))
compile_cache.enable(cfg.compilation_cache)
ds = runner.load_data(cfg); mark("data")
t = trainers.make_trainer(cfg, ds); mark("trainer")
t.compile(); mark("compile")
float(t.start_epoch(0)); mark("epoch 1")
float(t.start_epoch(1)); mark("epoch 2")
t.evaluate("test"); mark("evaluate")
prev, parts = 0.0, []
for k, v in marks.items():
  parts.append(f"{k} {v - prev:.2f}"); prev = v
print(f"{variant}: " + ", ".join(parts) + f"; total {prev:.2f} s")
