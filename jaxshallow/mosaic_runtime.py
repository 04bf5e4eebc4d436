"""Mosaic GPU's runtime for an executable loaded from the compilation cache (``compile_cache``)."""

import os
import pathlib


# Whether a warm run points Mosaic GPU's custom call at its runtime without importing Mosaic GPU.
LIGHT = os.environ.get("JAXSHALLOW_LIGHT_MOSAIC_IMPORT", "1") == "1"


def load() -> None:
  """Load Mosaic GPU's runtime before XLA loads an executable with one of its kernels: a warm run
  traces nothing, so nothing else imports it, and without it the H100 refused the cached
  executable ("Failed to lookup host symbol ... anonymous_mosaic_gpu", jax 0.11.2). What
  importing Mosaic GPU's Python does for that is to point the custom call at its runtime library
  (``MOSAIC_GPU_RUNTIME_LIB_PATH``, beside jaxlib's Mosaic GPU extension) and at CUDA
  (``MOSAIC_GPU_CUDA_ROOT``): done here without the rest of that import, 0.2-0.3 s
  (``LIGHT``; docs/design/time_to_result.md), else the import itself. A program
  without such a kernel skips it."""
  if LIGHT:
    try:
      from jax._src.lib import mosaic_gpu as mosaic_gpu_lib
      runtime = (pathlib.Path(mosaic_gpu_lib._mosaic_gpu_ext.__file__).parent
                 / "libmosaic_gpu_runtime.so")
      if runtime.exists():
        # As Mosaic GPU's import does (jax/experimental/mosaic/gpu/core.py): the runtime for
        # the custom call, and the CUDA root for its compile where XLA's cache has no
        # executable (a warm run of the lowered epoch alone).
        from jax._src import lib
        os.environ.setdefault("MOSAIC_GPU_RUNTIME_LIB_PATH", str(runtime))
        os.environ.setdefault("MOSAIC_GPU_CUDA_ROOT", lib.cuda_path or "/usr/local/cuda")
        return
    except (ImportError, AttributeError):
      pass
  try:
    import jax.experimental.mosaic.gpu  # noqa: F401
  except ImportError:
    pass
