"""The guard flag shared by the device checks (``experiments.check_kernels``) and the bench
(``benchmarks.bench``): one definition, so that both can be imported in one process."""

import contextlib

from absl import flags

from jaxshallow import backends

_FORBID_TRITON = flags.DEFINE_bool(
    "forbid_triton", True, "Run what should be Mosaic GPU (check_kernels' Mosaic groups, the "
    "bench's pallas rows on Mosaic GPU kernels) with jax's deprecation of Pallas' Triton "
    "backend as an error, so that none of it lowers a Triton kernel (jax 0.11 and newer). It sees "
    "what is lowered: a program loaded from a warm compilation cache is not checked (the bench "
    "runs with the cache off unless $JAXSHALLOW_COMPILATION_CACHE says otherwise).")


def guard(mosaic: bool):
  """``backends.triton_forbidden()`` for what should be Mosaic GPU (unless --noforbid_triton),
  else nothing."""
  return (backends.triton_forbidden() if mosaic and _FORBID_TRITON.value
          else contextlib.nullcontext())


def active() -> bool:
  """Whether the guard turns Triton lowerings into errors in this process."""
  return _FORBID_TRITON.value and backends.triton_state() == "deprecated"
