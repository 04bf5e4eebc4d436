"""XLA's shortest compiles, for runs whose times mean nothing: ``bench --quick`` and the CPU test
suite (``tests/conftest.py``). Importing this module imports nothing else of the project."""

import os


def lowest_cpu_level() -> None:
  """XLA at its lowest optimisation level (LLVM's backend): on the CPU most of a quick run's time
  is XLA compiling interpreted kernels run a few times on tiny inputs (the CNN's step 4.3 s
  against 2.7 at the lowest level; the test suite's tests but the quick grid 1446 s of two
  workers' time against 1689, jax 0.12.0.1, 2026-12-05). XLA reads XLA_FLAGS when jax starts
  its first backend, so this runs before anything touches a device; a level the user set is
  kept, and subprocesses inherit it."""
  flags_now = os.environ.get("XLA_FLAGS", "")
  if "xla_backend_optimization_level" not in flags_now:
    os.environ["XLA_FLAGS"] = f"{flags_now} --xla_backend_optimization_level=0".strip()
