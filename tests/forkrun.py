"""Run ``python -m SCRIPT ARGS...`` many times without paying ``import jax`` each time.

A server process imports jax, Pallas, optax, numpy and absl once (about a second of each
``python -m`` on the CPU, most of a bad command line's run), then forks a child a command; the
child runs the script as ``__main__`` (``runpy``, as ``python -m`` does) with the variables
given added to its environment, its arguments and output files of its own, and exits with what
the interpreter would have: the code of ``SystemExit``, or 1 after printing the traceback of any
other exception. Nothing of the project is imported before the fork, so no module has read an
earlier command's settings, and no JAX backend is started, so forking is safe.

What differs from a fresh ``python -m``: what jax reads when it is imported (``JAX_*``
variables: refused here) was read once, by the server; output printed while those modules were
imported is the server's; ``atexit`` handlers do not run (the child leaves by ``os._exit``).

  with Server(os.environ, ROOT) as server:
    code, out, err = server.run("experiments.mnist", ["--epochs=0"], env={})
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

_CHILD = r"""
import json, os, runpy, sys, traceback
import absl.app, absl.flags, jax, numpy, optax  # Imported once, before any fork.
from jax.experimental import pallas  # (Pallas' import is the other half of the cost.)
for line in sys.stdin:
  job = json.loads(line)
  pid = os.fork()
  if pid == 0:
    code = 1
    try:
      for fd, path in ((1, job["out"]), (2, job["err"])):  # First: nothing else is printed
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)  # (fresh files only)
        os.dup2(f, fd)
        os.close(f)
      os.environ.update(job["env"])
      os.chdir(job["cwd"])
      sys.path[:0] = job["path"]
      sys.argv = [job["script"], *job["args"]]
      try:
        runpy.run_module(job["script"], run_name="__main__", alter_sys=True)
        code = 0
      except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
          print(e.code, file=sys.stderr)
    except BaseException:
      traceback.print_exc()
    finally:
      sys.stdout.flush()
      sys.stderr.flush()
      os._exit(code)
  print(pid, flush=True)  # (the caller kills it if it runs too long)
  _, status = os.waitpid(pid, 0)
  print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


class Server:
  """The forking server (a context manager); ``run`` one command at a time."""

  def __init__(self, env, cwd):
    self.cwd = str(cwd)
    self.tmp = tempfile.TemporaryDirectory(prefix="forkrun-")
    self.jobs = itertools.count()
    # Unbuffered: ``_line`` waits on the pipe itself, which a reader's buffer would hide.
    self.proc = subprocess.Popen([sys.executable, "-c", _CHILD], env=dict(env), cwd=self.cwd,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)

  def run(self, script: str, args, env: dict, path=(), timeout: float = 600
          ) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``python -m script *args`` with ``env`` added (and
    ``path`` before sys.path); after ``timeout`` seconds the command is killed and
    TimeoutError raised."""
    if read_at_import := [k for k in env if k.startswith("JAX_")]:
      raise ValueError(f"{read_at_import}: read when jax is imported, once for the server")
    job_dir = os.path.join(self.tmp.name, str(next(self.jobs)))
    os.mkdir(job_dir)
    out, err = os.path.join(job_dir, "out"), os.path.join(job_dir, "err")
    job = dict(script=script, args=list(args), env=dict(env), path=[str(p) for p in path],
               cwd=self.cwd, out=out, err=err)
    self.proc.stdin.write((json.dumps(job) + "\n").encode())
    pid = int(self._line(60) or 0)
    if not pid:
      raise RuntimeError("the fork server died")
    code = self._line(timeout)
    if code is None:
      os.kill(pid, signal.SIGKILL)
      self._line(60)
      raise TimeoutError(f"python -m {script} {' '.join(args)}: over {timeout} s")
    with open(out) as o, open(err) as e:  # (missing if the child failed before its output)
      return json.loads(code), o.read(), e.read()

  def _line(self, timeout: float) -> str | None:
    """The server's next line, or None if none came within ``timeout`` seconds."""
    fd, got, end = self.proc.stdout.fileno(), b"", time.monotonic() + timeout
    while not got.endswith(b"\n"):
      if not select.select([fd], [], [], max(0.0, end - time.monotonic()))[0]:
        return None
      byte = os.read(fd, 1)
      if not byte:
        return got.decode() or None
      got += byte
    return got.decode()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.proc.stdin.close()
    try:
      self.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
    self.proc.stdout.close()
    self.tmp.cleanup()
