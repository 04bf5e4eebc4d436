"""jax-triton 0.3's calls lowered to jaxlib's typed-FFI target, so that XLA graphs them.

jax-triton 0.3.1 lowers every ``triton_call`` to the legacy custom call ``triton_kernel_call``.
XLA launches those one at a time from the host, outside the command buffers (CUDA graphs) that
carry the rest of a compiled step, so a step of small kernels waits on their launches (the
MLP's at batch 64 waited longer than its kernels ran). jaxlib (0.11) also registers the
typed-FFI target ``triton_kernel_call_ffi``, which jax-triton 0.4 uses (but 0.4 needs Triton
3.7). This module keeps jax-triton 0.3.1's lowering (the same compiled kernel, the same call
description) and hands that description to the FFI target as its ``opaque`` attribute, as 0.4
does: XLA then graphs the launches with the rest of the step, and the losses are the same bit
for bit (docs/design/op_kernels.md).
"""

from __future__ import annotations

import contextlib
import functools

import jax
from jax.interpreters import mlir

TARGET = "triton_kernel_call_ffi"


def available() -> bool:
  """Whether this jax-triton lowers to the legacy call and jaxlib has the FFI target."""
  try:
    import jax_triton
    from jaxlib.plugin_support import import_from_plugin
    plugin = import_from_plugin("cuda", "_triton")
  except ImportError:
    return False
  return (jax_triton.__version__.startswith("0.3.") and plugin is not None
          and TARGET in plugin.registrations())


@contextlib.contextmanager
def _typed_ffi_lowering():
  """While jax-triton lowers one call: its legacy lowering (api_version 2, the description as
  backend_config) becomes the typed-FFI one (api_version 4, the description as ``opaque``)."""
  legacy = jax.ffi.ffi_lowering

  def lowering(name, *, backend_config=None, api_version=None, operand_output_aliases=None,
               **kwargs):
    del api_version
    rule = legacy(name, api_version=4, operand_output_aliases=operand_output_aliases, **kwargs)
    return lambda ctx, *args: rule(ctx, *args, opaque=backend_config)

  jax.ffi.ffi_lowering = lowering
  try:
    yield
  finally:
    jax.ffi.ffi_lowering = legacy


def _lower_to_ffi(ctx, *args, **params):
  from jax_triton import triton_lib
  with _typed_ffi_lowering():
    return triton_lib.triton_kernel_call_lowering(
        triton_lib.get_cuda_backend, ctx, *args, **dict(params, custom_call_target_name=TARGET))


def use_typed_ffi(on: bool = True) -> bool:
  """Lower jax-triton's calls on CUDA to the FFI target (``on``) or back to its own lowering.
  Takes effect for functions compiled afterwards. Returns whether the FFI lowering is in use."""
  if not available():
    return False
  from jax_triton import triton_lib
  rule = _lower_to_ffi if on else functools.partial(triton_lib.triton_kernel_call_lowering,
                                                      triton_lib.get_cuda_backend)
  mlir.register_lowering(triton_lib.triton_kernel_call_p, rule, platform="cuda")
  return on
