"""Files written whole or not at all."""

from __future__ import annotations

import os
import pathlib
import tempfile


def write_atomically(path: os.PathLike, data: str | bytes) -> None:
  """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``: a crash
  mid-write never replaces a good file with a broken one, nor leaves the temporary behind."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
      f.write(data)
    # mkstemp makes the file readable by its owner alone; a result file gets the permissions
    # any other file would (0666 less the umask).
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def _umask() -> int:
  mask = os.umask(0)  # Read by setting it; put back at once.
  os.umask(mask)
  return mask
