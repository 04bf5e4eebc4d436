"""#54: where a warm run goes, phase by phase, in a fresh process (seconds from its start).
args: impl (xla|pallas) model cache_dir."""
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
impl, model, cache = sys.argv[1:4]
cfg = config.resolve(config.Config(impl=impl, model=model, compilation_cache=cache))
cfg = paths.resolve(cfg); mark("path")
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
print(f"{impl} {model}: " + ", ".join(parts) + f"; total {prev:.2f}", flush=True)
