import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def real_data_dir():
  """The folder of the real IDX files, or skip: set JAXSHALLOW_DATA_DIR (CI points it at
  ../shared/data)."""
  d = os.environ.get("JAXSHALLOW_DATA_DIR")
  if not d or not (pathlib.Path(d) / "mnist").is_dir():
    pytest.skip("JAXSHALLOW_DATA_DIR does not hold mnist/")
  return pathlib.Path(d)


# The tests never write the user's compilation cache; tests/test_compile_cache.py turns it on
# in a temporary folder.
os.environ["JAXSHALLOW_COMPILATION_CACHE"] = "off"

# XLA's CPU backend at its lowest optimisation level (LLVM's), as benchmarks.bench --quick does:
# most of the suite's time is XLA compiling interpret-mode kernels, each run a few times on tiny
# inputs. On 2026-12-05 (2 cores, jax 0.12.0.1) its tests but the quick grid took 1446 s of the
# workers' time against 1689 s at the default level, all passing. Set before any test starts a
# backend; subprocesses inherit it; a level the user set is kept.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_backend_optimization_level=0").strip()
