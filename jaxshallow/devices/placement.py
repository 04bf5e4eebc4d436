"""Arrays on several devices: one-axis meshes, and host arrays spread over them or copied to
each, as the population (members over devices) and data-parallel training (replicas) need.

Everything here works with the devices of other processes too (``jaxshallow.devices.distributed``):
each process gives the same whole host arrays and keeps the slices of its own devices.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxshallow.run.config import ConfigError


def pick_devices(count: int = 0) -> list:
  """The first ``count`` devices of every process (0: all); ConfigError if there are fewer."""
  devices = jax.devices()
  if count < 0:
    raise ConfigError(f"--devices must be at least 0 (0: all), got {count}")
  if count > len(devices):
    raise ConfigError(f"--devices={count}, but there are {len(devices)} devices")
  return devices[:count or len(devices)]


def mesh(devices, axis: str) -> Mesh:
  """A one-axis mesh named ``axis`` over ``devices``."""
  return Mesh(np.asarray(devices), (axis,))


def shard(tree, the_mesh: Mesh):
  """Host arrays split along their leading axis over the mesh's axis (its length must be a
  multiple of the mesh's size)."""
  return _place(tree, NamedSharding(the_mesh, P(the_mesh.axis_names[0])))


def replicate(tree, the_mesh: Mesh):
  """Host arrays copied whole to every device of the mesh."""
  return _place(tree, NamedSharding(the_mesh, P()))


def _place(tree, sharding):
  def put(a):
    a = np.asarray(a)
    return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])
  return jax.tree.map(put, tree)


def gather(a) -> np.ndarray:
  """A (possibly sharded, possibly multi-process) array as one host array."""
  if isinstance(a, jax.Array) and not a.is_fully_addressable:
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(a, tiled=True))
  return np.asarray(a)
