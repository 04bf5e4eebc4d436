"""Flags for runs over several processes (hosts), shared by the experiment scripts."""

from absl import flags

from jaxshallow.devices import distributed

_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "host:port of process 0, to run over several processes "
    "(else $JAX_COORDINATOR_ADDRESS; unset: one process).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Processes in the run (else "
                                      "$JAX_NUM_PROCESSES, else detected from the cluster).")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index, 0 first (else "
                                   "$JAX_PROCESS_ID, else detected from the cluster).")


def initialize() -> bool:
  """``jaxshallow.devices.distributed.initialize`` from the flags; call it before anything
  uses jax."""
  return distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)


is_main_process = distributed.is_main_process
