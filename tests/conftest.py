import os
import pathlib

import pytest

from benchmarks import quick

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

# XLA's CPU backend at its lowest optimisation level, as bench --quick runs: most of the suite's
# time is XLA compiling interpret-mode kernels (benchmarks.quick says what it saved).
quick.lowest_cpu_level()
