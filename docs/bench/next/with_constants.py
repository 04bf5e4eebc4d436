"""python docs/bench/next/with_constants.py "MODULE.CONSTANT ..." MODULE ARGS...: run ``python -m
MODULE ARGS...`` (or a script, ``path.py``) with each named module constant set to True first (a
kernel's form that is off by default, for the checks and probes that take its module's
default)."""
import importlib
import runpy
import sys

for name in sys.argv[1].split():
  module, constant = name.rsplit(".", 1)
  setattr(importlib.import_module(module), constant, True)
sys.argv = sys.argv[2:]
if sys.argv[0].endswith(".py"):
  runpy.run_path(sys.argv[0], run_name="__main__")
else:
  runpy.run_module(sys.argv[0], run_name="__main__")
