"""Compiled work kept on disk between runs, so that a second run of a network starts at once.

Two caches in one folder: JAX's persistent compilation cache (``xla/``: XLA's executables), and
the lowered epoch kept as a ``jax.export`` artifact (``lowered/``). The second is what the
Pallas kernels need: JAX consults its cache only after lowering, and lowering a Mosaic GPU
kernel (its layout inference) is most of its compile time. An artifact is keyed by the jax,
jaxlib and optax versions, the device, the arguments' shapes, the run's settings and the
project's source (or the traced program), so any change to the kernels, the network or the
settings misses the cache instead of running stale code.

The folder: ``--compilation_cache``, else ``$JAXSHALLOW_COMPILATION_CACHE``, else the user cache
beside the data (``$XDG_CACHE_HOME/jaxshallow/compiled``); ``off`` switches both off. Where the
user configured JAX's own cache (``JAX_COMPILATION_CACHE_DIR`` or ``jax_compilation_cache_dir``)
JAX's settings are left as they are.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pathlib
import pickle
import tempfile
import threading
from typing import Callable

import jax
import jaxlib
import numpy as np
import optax

from jaxshallow import data as data_lib, files, mosaic_runtime

ENV_VAR = "JAXSHALLOW_COMPILATION_CACHE"
# A compilation that takes longer than this says so in one line.
NOTICE_AFTER_S = 3.0

log = logging.getLogger("jaxshallow")
_state = {"folder": None, "jax_dir": None}  # This process's folder; the JAX cache dir we set.

# Held while a program is traced or lowered. Tracing in two threads at once is not safe: jax
# registers some effect types at the first use of a module (Pallas' among them), and a CI run
# (jax 0.10.2) failed with "Set changed size during iteration" inside a ``pl.when`` traced
# while the evaluation's thread did that. XLA's compile, what runs side by side, is outside it.
TRACING = threading.RLock()


def lower_and_compile(jitted, *args, lowered: threading.Event | None = None, **static):
  """``jitted.lower(*args, **static).compile()``, lowered under ``TRACING``. ``lowered``: set
  once the program is lowered, before XLA compiles it (another thread may trace then)."""
  with TRACING:
    program = jitted.lower(*args, **static)
  if lowered is not None:
    lowered.set()
  return program.compile()


def folder_of(setting: str | None) -> pathlib.Path | None:
  """The cache folder a ``--compilation_cache`` setting names (None: off)."""
  value = setting or os.environ.get(ENV_VAR) or ""
  if value.lower() == "off":
    return None
  return pathlib.Path(value).expanduser() if value else data_lib.cache_dir() / "compiled"


def problem(setting: str | None) -> str | None:
  """Why the folder that ``setting`` (or the environment) names cannot be written (one line),
  or None. The default folder is not checked here: where it cannot be written, ``enable``
  switches the caches off with a notice."""
  if not (setting or os.environ.get(ENV_VAR)):
    return None
  folder = folder_of(setting)
  if folder is None:
    return None
  if why := _unwritable(folder):
    name = "--compilation_cache" if setting else f"${ENV_VAR}"
    return f"{name} {folder}: {why}; give a folder, or off"
  return None


@functools.lru_cache(maxsize=None)  # Once a process: every trainer and validation asks.
def _unwritable(folder: pathlib.Path) -> str | None:
  try:
    folder.mkdir(parents=True, exist_ok=True)
    tempfile.TemporaryFile(dir=folder).close()
  except OSError as e:
    return f"cannot write there ({e.strerror or e})"
  return None


def enable(setting: str | None = None) -> pathlib.Path | None:
  """Switch the caches on (or off) for this process as ``setting`` says; returns the folder."""
  from jax.experimental.compilation_cache import compilation_cache as jax_cache
  folder = folder_of(setting)
  if folder is not None and (why := _unwritable(folder)):
    log.warning("the compilation cache is off: %s %s", folder, why)
    folder = None
  _state["folder"] = folder
  current = jax.config.jax_compilation_cache_dir
  if current is not None and current != _state["jax_dir"]:
    return folder  # The user's own JAX cache: left alone.
  jax_dir = str(folder / "xla") if folder else None
  if jax_dir != current:
    jax.config.update("jax_compilation_cache_dir", jax_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax_cache.reset_cache()  # JAX reads the folder once, at its first compilation.
    _state["jax_dir"] = jax_dir
  return folder


def compile(jitted, args: tuple, static: dict, *, donate: tuple[int, ...] = (),
            what: str = "the training epoch", settings: str | None = None,
            exportable: bool = True, lowered: threading.Event | None = None) -> Callable:
  """``jitted.lower(*args, **static).compile()``, through the lowered cache where it is on.
  Returns a function of ``args``' pytrees. ``donate``: positions in ``args`` whose buffers the
  call may reuse (as ``jitted`` donates them). ``settings``: a text that fixes ``static``
  whole (the run's settings); the key is then that text, the arguments' shapes and the hash of
  this project's source, and a warm run does not even trace. Without it the key is the traced
  program itself. ``exportable`` False (custom calls ``jax.export`` cannot keep, such as the
  triton impl's): XLA's cache only. ``lowered``: as ``lower_and_compile``'s."""
  folder = _state["folder"]
  plain = lambda: lower_and_compile(jitted, *args, lowered=lowered, **static)
  with _notice(what, folder):
    if folder is None or not exportable:
      return plain()
    leaves, in_tree = jax.tree.flatten(args)
    parts = [str(in_tree), *(f"{np.shape(x)} {x.dtype}" for x in leaves)]
    with TRACING:
      if settings is not None:
        parts.append(settings)
      else:
        traced = jitted.trace(*args, **static)
        parts += [str(traced.jaxpr), *(np.asarray(c).tobytes().hex()
                                       for c in traced.jaxpr.consts)]
      path = folder / "lowered" / _key(parts)
      entry = _load(path) or _export(jitted, in_tree, static, leaves)
    if entry is None:  # Not exportable: compiled as usual.
      return plain()
    exported, out_tree = entry
    first = np.cumsum([0] + [len(jax.tree.leaves(a)) for a in args])
    donated = tuple(i for a in donate for i in range(first[a], first[a + 1]))
    try:
      fn = lower_and_compile(jax.jit(exported.call, donate_argnums=donated), *leaves,
                             lowered=lowered)
    except Exception as e:  # noqa: BLE001 -- an entry this machine cannot run: compile anew.
      log.warning("compilation cache entry %s not usable here (%s); compiling anew", path.name,
                  _first_line(e))
      path.unlink(missing_ok=True)
      return plain()
    if not path.exists():  # (after its compile: what waits for ``lowered`` need not wait)
      _save(path, exported, out_tree)
  return _Compiled(fn, out_tree, in_tree)


class _Compiled:
  """A compiled flat function called with, and returning, the pytrees it was traced with."""

  def __init__(self, fn, out_tree, in_tree):
    self.fn, self.out_tree, self.in_tree = fn, out_tree, in_tree

  def __call__(self, *args):
    leaves, in_tree = jax.tree.flatten(args)
    if in_tree != self.in_tree:
      raise TypeError(f"compiled for arguments {self.in_tree}, called with {in_tree}")
    return jax.tree.unflatten(self.out_tree, self.fn(*leaves))

  def memory_analysis(self):
    return self.fn.memory_analysis()


def _key(parts) -> str:
  h = hashlib.sha256()
  for part in (jax.__version__, jaxlib.version.__version__, optax.__version__,
               jax.devices()[0].device_kind, _jax_settings(), _source_hash(), *parts):
    h.update(part.encode())
    h.update(b"\0")
  return h.hexdigest()[:32]


# JAX's settings that change what a traced program computes. (Not its whole trace context: that
# also holds state that changes within a process, and so would miss the cache for nothing.)
_JAX_SETTINGS = ("jax_enable_x64", "jax_numpy_dtype_promotion", "jax_numpy_rank_promotion",
                 "jax_default_matmul_precision", "jax_default_prng_impl",
                 "jax_threefry_partitionable", "jax_softmax_custom_jvp", "jax_dynamic_shapes")


def _jax_settings() -> str:
  return repr([getattr(jax.config, name, None) for name in _JAX_SETTINGS])


# The packages whose source makes the programs: any edit to them misses the cache.
_SOURCES = ("jaxshallow", "pallas_kernels", "triton_kernels")


def _source_hash() -> str:
  if "source" not in _state:
    h = hashlib.sha256()
    root = pathlib.Path(__file__).resolve().parents[1]
    for package in _SOURCES:
      for f in sorted((root / package).rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    _state["source"] = h.hexdigest()
  return _state["source"]


def _export(jitted, in_tree, static, leaves):
  """The function exported with flat arguments and results, and its results' pytree."""
  out = {}

  def flat(*xs):
    results, out["tree"] = jax.tree.flatten(jitted(*jax.tree.unflatten(in_tree, xs), **static))
    return results
  avals = [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves]
  # Pallas' Triton kernels are a custom call that jax.export does not vouch for across
  # versions; the key holds the versions, so an artifact is only read back by the same ones.
  unchecked = [jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]
  try:
    return jax.export.export(jax.jit(flat), disabled_checks=unchecked)(*avals), out["tree"]
  except Exception as e:  # noqa: BLE001 -- a cache: anything it cannot keep compiles as usual.
    log.warning("the lowered epoch is not kept between runs (%s)", _first_line(e))
    return None


# A Mosaic GPU kernel in a lowered program's text ("custom_call @mosaic_gpu_v2" in jax 0.10 to
# 0.12); the call, not the name alone, which the source locations in the text may hold.
MOSAIC_GPU_CALL = "custom_call @mosaic_gpu"


def _load(path: pathlib.Path):
  """(exported, results' pytree) from an entry, or None. The folder is trusted as JAX's own
  cache is: an entry holds a program that will run."""
  try:
    entry = pickle.loads(path.read_bytes())
    if entry.get("mosaic_gpu"):
      mosaic_runtime.load()
    return jax.export.deserialize(bytearray(entry["exported"])), entry["out_tree"]
  except FileNotFoundError:
    return None
  except Exception as e:  # noqa: BLE001 -- a damaged entry is compiled again and replaced.
    log.debug("compilation cache entry %s unreadable: %s", path, e)
    return None


def _save(path: pathlib.Path, exported, out_tree) -> None:
  """Atomically, so that a run stopped mid-write never leaves a broken entry."""
  try:
    blob = pickle.dumps({"exported": bytes(exported.serialize()), "out_tree": out_tree,
                         "mosaic_gpu": MOSAIC_GPU_CALL in exported.mlir_module()})
  except Exception as e:  # noqa: BLE001 -- flatbuffers missing, or anything else: not kept.
    log.warning("the lowered epoch is not kept between runs (%s)", _first_line(e))
    return
  try:
    files.write_atomically(path, blob)
  except OSError as e:
    log.warning("could not write the compilation cache in %s (%s); next run compiles again",
                path.parent, e.strerror or e)


def _first_line(e: Exception) -> str:
  return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


class _notice:
  """One line if the compilation inside takes over ``NOTICE_AFTER_S``."""

  def __init__(self, what: str, folder: pathlib.Path | None):
    where = (f"kept in {folder} for the next run" if folder else
             "the compilation cache is off (--compilation_cache)")
    self.timer = threading.Timer(NOTICE_AFTER_S, log.warning,
                                 (f"compiling {what} (a first run of this network; {where})",))
    self.timer.daemon = True

  def __enter__(self):
    self.timer.start()

  def __exit__(self, *exc):
    self.timer.cancel()
