"""Run ``python -m SCRIPT ARGS...`` many times without paying ``import jax`` each time.

A server process imports jax, Pallas, optax, numpy and absl once (about a second of each
``python -m`` on the CPU, most of a bad command line's run), then forks a child a command; the
child runs the script as ``__main__`` (``runpy``, as ``python -m`` does) with its own
environment, arguments and output files, and exits with what the interpreter would have: the
code of ``SystemExit``, or 1 after printing the traceback of any other exception. Nothing of
the project is imported before the fork, so no module has read an earlier command's settings,
and no JAX backend is started, so forking is safe.

  with Server(env) as server:
    code, out, err = server.run("experiments.mnist", ["--epochs=0"], env={...})
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, os, runpy, sys, traceback
import absl.app, absl.flags, jax, numpy, optax  # Imported once, before any fork.
from jax.experimental import pallas  # (Pallas' import is the other half of the cost.)
for line in sys.stdin:
  job = json.loads(line)
  pid = os.fork()
  if pid == 0:
    os.environ.update(job["env"])
    os.chdir(job["cwd"])
    sys.path[:0] = job["path"]
    for fd, path in ((1, job["out"]), (2, job["err"])):
      f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
      os.dup2(f, fd)
      os.close(f)
    sys.argv = [job["script"], *job["args"]]
    code = 0
    try:
      runpy.run_module(job["script"], run_name="__main__", alter_sys=True)
    except SystemExit as e:
      code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
      if not isinstance(e.code, (int, type(None))):
        print(e.code, file=sys.stderr)
    except BaseException:
      traceback.print_exc()
      code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
  _, status = os.waitpid(pid, 0)
  print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


class Server:
  """The forking server (a context manager); ``run`` one command at a time."""

  def __init__(self, env: dict, cwd):
    self.cwd = str(cwd)
    self.proc = subprocess.Popen([sys.executable, "-c", _CHILD], env=env, cwd=self.cwd,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self.tmp = tempfile.TemporaryDirectory(prefix="forkrun-")

  def run(self, script: str, args, env: dict, path=()) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``python -m script *args`` with ``env`` added (and
    ``path`` before sys.path)."""
    out, err = os.path.join(self.tmp.name, "out"), os.path.join(self.tmp.name, "err")
    job = dict(script=script, args=list(args), env=env, path=[str(p) for p in path],
               cwd=self.cwd, out=out, err=err)
    self.proc.stdin.write(json.dumps(job) + "\n")
    self.proc.stdin.flush()
    line = self.proc.stdout.readline()
    if not line:
      raise RuntimeError("the fork server died")
    with open(out) as o, open(err) as e:
      return json.loads(line), o.read(), e.read()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.proc.stdin.close()
    self.proc.wait(timeout=60)
    self.tmp.cleanup()
