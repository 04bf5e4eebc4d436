"""Several processes (hosts) as one JAX program: ``jax.distributed.initialize`` from arguments
or the usual environment variables.

Each process runs the same script; after ``initialize``, ``jax.devices()`` lists the devices of
every process, a ``Mesh`` over them spans hosts, and XLA's collectives (NCCL on GPUs, gloo on
CPUs) move data between them. Process 0 reports and writes the results.
"""

from __future__ import annotations

import os

import jax

from jaxshallow.run.config import ConfigError

ENV = {"coordinator_address": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
       "process_id": "JAX_PROCESS_ID"}


def _from_env(name: str):
  value = os.environ.get(ENV[name])
  if value is None or name == "coordinator_address":
    return value
  try:
    return int(value)
  except ValueError:
    raise ConfigError(f"${ENV[name]} must be an integer, got {value!r}") from None


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> bool:
  """Join a multi-process run if a coordinator is named (here or in $JAX_COORDINATOR_ADDRESS);
  returns whether it did. The process count and id come from the arguments, else
  $JAX_NUM_PROCESSES and $JAX_PROCESS_ID, else JAX's detection of the cluster (SLURM, Open MPI,
  ...). Process 0 must listen at the coordinator address (host:port)."""
  address = coordinator_address or _from_env("coordinator_address")
  if not address:
    if num_processes not in (None, 1):
      raise ConfigError("several processes need a coordinator address (host:port)")
    return False
  num = num_processes if num_processes is not None else _from_env("num_processes")
  pid = process_id if process_id is not None else _from_env("process_id")
  if num is not None and num < 1:
    raise ConfigError(f"the process count must be at least 1, got {num}")
  if num is not None and pid is not None and not 0 <= pid < num:
    raise ConfigError(f"the process id must be in 0..{num - 1}, got {pid}")
  try:
    jax.distributed.initialize(address, num, pid)
  except (RuntimeError, ValueError) as e:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise ConfigError(f"could not join the run at {address}: {first}") from None
  return True


def is_main_process() -> bool:
  """Process 0: the one that prints and writes the results."""
  return jax.process_index() == 0
