"""Mosaic GPU's interpreter (jax 0.12) taught the two things ``stream_population_mgpu`` needs
to run on the CPU: refs indexed by traced values (its walk's tiles; the interpreter checks they
are static, but by then they are numbers) and reads of the peer CTA's shared memory
(``plgpu.cluster_ref``: the same allocation of the cluster's other block). Tests only: it
patches two private functions of jax, for the versions ``problem`` admits.

With it the kernel, 2 CTAs of 2 warpgroups, runs a step of one member in about 6 s on this
project's 2-core machine, its weights and losses within 1e-6 of their float64 twin's largest
(2026-12-08). The race detector (``detect_races``) checks its copies, stores and mbarriers;
in jax 0.12.1 it keeps no clocks for wgmma, so reads by the tensor cores go unchecked."""

from __future__ import annotations

import dataclasses
import inspect
import os

_INSTALLED = False


def problem() -> str | None:
  """Why the interpreter cannot run the kernel here (one line), or None."""
  if os.environ.get("JAXSHALLOW_INTERPRETER_TESTS") != "1":
    return "JAXSHALLOW_INTERPRETER_TESTS unset (the interpreted kernels take minutes)"
  from pallas_kernels import common
  if common.jax_version() < (0, 12):  # jax 0.11's takes no register operand in a wgmma
    return "Mosaic GPU's interpreter runs this kernel from jax 0.12"
  try:
    from jax._src.pallas.mosaic_gpu import core as gpu_core
    from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks, shared_memory
    params = list(inspect.signature(gpu_callbacks._get).parameters)
    known = (gpu_callbacks._validate_transforms, gpu_core.ClusterRefTransform,
             shared_memory.HostAllocationKey)
  except (ImportError, AttributeError):
    known = params = None
  if not known or params[:5] != ["token", "mesh_location", "thread", "allocation_key_as_array",
                                 "transforms"]:
    return "this jax's interpreter is not the one these additions were written for (jax 0.12)"
  return None


def install() -> None:
  """The two additions (once a process)."""
  global _INSTALLED
  if _INSTALLED:
    return
  from jax._src.pallas.mosaic_gpu import core as gpu_core
  from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks, shared_memory
  from jax._src.state import indexing, types as state_types
  kinds = (indexing.NDIndexer, state_types.TransposeTransform, gpu_core.ClusterRefTransform)

  def validate(transforms):
    for t in transforms:
      if not isinstance(t, kinds):
        raise ValueError(f"Unsupported transform: {t}")

  get = gpu_callbacks._get

  def get_from_peer(token, mesh_location, thread, key, transforms, *args, **kwargs):
    peer = [t for t in transforms if isinstance(t, gpu_core.ClusterRefTransform)]
    if peer:  # The same allocation (every block allocates in the same order) of the peer
      if len(peer[0].idxs) != 1:
        raise ValueError("a cluster of one axis only")
      transforms = tuple(t for t in transforms if t is not peer[0])
      key = shared_memory.HostAllocationKey.from_array(key)
      key = dataclasses.replace(key, block_id=int(peer[0].idxs[0])).as_np_array
    return get(token, mesh_location, thread, key, transforms, *args, **kwargs)

  gpu_callbacks._validate_transforms = validate
  gpu_callbacks._get = get_from_peer
  _INSTALLED = True


def in_own_process(request, timeout: float = 300) -> bool:
  """Runs the calling test's case in a fresh pytest process, unless this is that process (then
  False: run it here). A process that interprets several kernels stalled at its fourth, twice
  (2026-12-08): XLA's CPU pool has a thread a CPU, and warpgroups' computations waiting at a
  barrier in its threads left none for the ones that would arrive (py-spy showed both pool
  threads in barrier callbacks, the other warpgroups' computations waiting to run). Alone,
  every case passed. A case that runs past ``timeout`` fails as stalled."""
  import fcntl
  import subprocess
  import sys
  import tempfile
  if os.environ.get("JAXSHALLOW_INTERPRETER_CHILD") == "1":
    return False
  env = {**os.environ, "JAXSHALLOW_INTERPRETER_CHILD": "1"}
  cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         request.node.nodeid]
  # One case at a time on the machine, whatever pytest's workers: two at once stalled
  lock = os.path.join(tempfile.gettempdir(), "jaxshallow-interpreter.lock")
  with open(lock, "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      done = subprocess.run(cmd, env=env, cwd=request.config.rootpath, capture_output=True,
                            text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
      raise AssertionError(f"{request.node.name} stalled in the interpreter ({timeout:.0f} s)")
  assert done.returncode == 0 and "1 passed" in done.stdout, (
      done.stdout[-3000:] + done.stderr[-2000:])
  return True


def races_found() -> bool:
  """Whether the race detector recorded a race."""
  from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks
  return bool(gpu_callbacks.get_races().races_found)
