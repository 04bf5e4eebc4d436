"""How long lowering a Mosaic GPU kernel for Hopper takes on the CPU (the Python part of a cold
compile): probes.same_module's kernels named on the command line, twice each in one process.

  PYTHONPATH=. python docs/bench/2026-12-08_h100/cpu_lowering.py logreg cluster_mlp
"""
import time, sys
t0=time.perf_counter()
from probes import same_module as sm
import jax  # noqa: F401 (its import timed apart from the lowering)
t1=time.perf_counter()
for k in sys.argv[1:]:
  for i in range(2):
    t=time.perf_counter(); low=sm.lowered(k, 256, 64, "float32", 938); t2=time.perf_counter()
    print(k, f"lower {t2-t:.2f} s (run {i})")
print(f"import {t1-t0:.2f}")
