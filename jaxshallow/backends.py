"""Which compiler a Pallas path lowers through, and what this jax says of Pallas' Triton backend.

jax 0.11 and 0.12 deprecate the Triton backend (``jax-pallas-triton``: every Triton lowering
warns, hidden by default) and will remove it; Mosaic GPU is its successor on Hopper
(docs/design/backends.md). A resolved ``--impl=pallas`` Config's path lowers through one of:

  mosaic  Mosaic GPU: the Hopper epoch kernels (cluster, phase, tile and one-CTA kernels) and
          the populations of a cluster (a CTA) a member
  triton  Pallas' Triton backend: the op kernels, the CNN's step kernels, the grid epoch
          kernel (``mlp_epoch``), the population step kernels
  xla     no Pallas kernel (the xla path)

This module says which (``of_path``), tells the user once where their run depends on the
deprecated backend (``notice``), and gives the device checks a guard that turns the deprecation
into an error (``triton_forbidden``).
"""

from __future__ import annotations

import contextlib
import os

DEPRECATION = "jax-pallas-triton"
MOSAIC_FUSIONS = ("cluster", "stream")  # A population's paths of Mosaic GPU kernels
# The epoch kernels (``paths.epoch_kernel``) that are Mosaic GPU; "grid" is Triton.
MOSAIC_EPOCH_KERNELS = ("cluster_mlp", "cluster_epoch", "grid_regression", "tile_regression",
                        "tile_mlp", "logreg")


def triton_state() -> str:
  """"removed" where this jax has no Pallas Triton backend, "deprecated" where it warns on
  every Triton lowering (jax 0.11, 0.12), else "supported" (jax 0.10). Read from the installed
  files, without importing Pallas (a warm run's imports stay as they are)."""
  import jax._src
  if not os.path.isdir(os.path.join(os.path.dirname(jax._src.__file__), "pallas", "triton")):
    return "removed"
  from jax._src import deprecations
  try:
    deprecations.is_accelerated(DEPRECATION)
  except ValueError:  # Not registered: this jax does not deprecate it.
    return "supported"
  return "deprecated"


def of_path(fusion: str, epoch_kernel: str | None = None) -> str:
  """"mosaic", "triton" or "xla": what a pallas path (``Path.fusion``; for "epoch" the kernel
  ``paths.epoch_kernel`` names) lowers through."""
  if fusion == "xla":
    return "xla"
  if fusion in MOSAIC_FUSIONS or (fusion == "epoch" and epoch_kernel in MOSAIC_EPOCH_KERNELS):
    return "mosaic"
  return "triton"


def missing(asked: str | None) -> str:
  """Why a Triton path cannot run on this jax, in one line: a path the user asked for
  (``asked``, a ``--fusion``) is refused (ConfigError); the default's reason is returned."""
  if asked is not None:
    from jaxshallow.run.config import ConfigError
    raise ConfigError(f"--fusion={asked} needs Pallas' Triton backend, which this jax does not "
                      "have; --impl=xla trains this network")
  return "this jax has no Pallas Triton backend, which this network's Pallas kernels need"


def notice(what: str, version: str) -> str:
  """The one line a run on the deprecated backend prints: ``what`` (e.g. "the op kernels")
  lower through it, and what to use once a jax removes it."""
  return (f"note: {what} lower through Pallas' Triton backend, which jax {version} deprecates; "
          "a jax without it trains this network on xla's path (--impl=xla; --impl=triton, "
          "jax-triton's kernels, for the MLP family); docs/design/backends.md")


def forbidden(error: Exception) -> bool:
  """Whether ``error`` is a Triton lowering that ``triton_forbidden`` stopped (jax's text)."""
  return isinstance(error, ValueError) and "Pallas Triton backend is deprecated" in str(error)


@contextlib.contextmanager
def triton_forbidden():
  """Within: a Pallas Triton lowering raises (jax's own ValueError, the deprecation's text)
  instead of warning, so that a Hopper path that should be Mosaic GPU cannot quietly lower a
  Triton kernel. Nothing changes with a jax that does not deprecate the backend."""
  if triton_state() != "deprecated":
    yield
    return
  from jax._src import deprecations
  before = deprecations.is_accelerated(DEPRECATION)
  deprecations.accelerate(DEPRECATION)
  try:
    yield
  finally:
    if not before:  # jax has no public way back; its registry entry holds the flag.
      deprecations._registered_deprecations[DEPRECATION].accelerated = False
