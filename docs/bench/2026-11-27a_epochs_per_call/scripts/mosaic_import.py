"""Which import lets a warm run load a cached program with a Mosaic GPU kernel, and its cost.
args: module ("none" for nothing) cache_dir. Runs experiments.mnist (MLP, pallas, 2 epochs)."""
import importlib, runpy, sys, time
module, cache = sys.argv[1], sys.argv[2]
import jax
t0 = time.perf_counter()
if module != "none":
  importlib.import_module(module)
took = time.perf_counter() - t0
from jaxshallow import compile_cache
compile_cache._import_mosaic_gpu = lambda: None  # Only what this run imported above.
print(f"IMPORT {module}: {took:.3f} s", file=sys.stderr, flush=True)
sys.argv = ["experiments.mnist", "--impl=pallas", "--epochs=2", f"--compilation_cache={cache}"]
runpy.run_module("experiments.mnist", run_name="__main__")
