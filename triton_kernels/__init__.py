"""The MLP family's op kernels in raw Triton, called from JAX through jax-triton
(``jax_triton.triton_call``): the twins of ``pallas_kernels.ops.dense`` and
``pallas_kernels.ops.softmax_xent``, kernel for kernel, for ``impl="triton"``.

Read each module beside its Pallas twin: the tiles, masks and loops are the same; what differs
is that Triton takes raw pointers and index arithmetic where Pallas takes refs and block specs,
and that a kernel's outputs come after all of its inputs in its signature (jax-triton passes
them in that order). GPU only: Triton has no interpreter that jax-triton can run on a CPU.
"""

from __future__ import annotations

import os


def _import_jax_triton() -> None:
  """Imports jax-triton and undoes its one side effect: 0.3.1 sets TRITON_CACHE_DIR to "" when
  imported, which leaves every other Triton user of the process without a cache directory
  (torch.compile then fails: "Could not create or locate cache dir"); 0.4 deletes it instead."""
  before = os.environ.get("TRITON_CACHE_DIR")
  try:
    import jax_triton  # noqa: F401
  except ImportError:
    return
  finally:
    if before is None:
      os.environ.pop("TRITON_CACHE_DIR", None)
    else:
      os.environ["TRITON_CACHE_DIR"] = before


_import_jax_triton()  # Before dense.py and softmax_xent.py import it.

from triton_kernels import ffi  # noqa: E402

ffi.use_typed_ffi()  # XLA then graphs the kernels' launches with the rest of the step.


def unavailable() -> str | None:
  """None if the Triton kernels can run here, else what is missing (one line)."""
  try:
    import jax_triton  # noqa: F401
    import triton  # noqa: F401
  except ImportError:
    return "jax-triton and triton (pip install -e '.[triton]')"
  import jax
  if jax.default_backend() != "gpu":
    return f"a CUDA GPU (jax runs on {jax.default_backend()})"
  return None
