"""MNIST and Fashion-MNIST from the original gzip IDX files.

Where the files come from, first match wins:
  1. the ``data_dir`` argument (the ``--data_dir`` flag); a ``data_dir`` that is not an existing
     folder is an error,
  2. the ``JAXSHALLOW_DATA_DIR`` environment variable,
  3. the per-user cache, ``$XDG_CACHE_HOME/jaxshallow`` (default ``~/.cache/jaxshallow``),
  4. a download into that cache from the public mirrors, or from the comma-separated base URLs in
     ``JAXSHALLOW_MIRRORS`` when that is set.
Each root holds one folder per data set (``mnist/``, ``fashion-mnist/``); files placed directly in
the root are found too. Every file is checked against its MD5 before it is read.

Images come back as uint8 ``(n, 28, 28)`` and labels as uint8 ``(n,)``: compact on the host, and
scaled to [0, 1] on the device, inside the compiled step.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import pathlib
import struct
import tempfile
import urllib.request
from typing import NamedTuple, Sequence

import numpy as np


class DataError(RuntimeError):
  """A data file is missing, corrupt or could not be downloaded. The message is one line."""


class Dataset(NamedTuple):
  train_images: np.ndarray  # uint8 (n, 28, 28)
  train_labels: np.ndarray  # uint8 (n,)
  test_images: np.ndarray
  test_labels: np.ndarray


# name -> (folder, mirrors, {file: md5}). Checksums are those of the original distributions.
DATASETS = {
    "mnist": (
        "mnist",
        (
            "https://ossci-datasets.s3.amazonaws.com/mnist/",
            "https://storage.googleapis.com/cvdf-datasets/mnist/",
        ),
        {
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
    ),
    "fashion": (
        "fashion-mnist",
        (
            "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        ),
        {
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
    ),
}
ENV_VAR = "JAXSHALLOW_DATA_DIR"
MIRRORS_VAR = "JAXSHALLOW_MIRRORS"
_IDX_MAGIC = {1: 2049, 3: 2051}  # IDX magic numbers for uint8 vectors and 3-d arrays.


def cache_dir() -> pathlib.Path:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return pathlib.Path(base) / "jaxshallow"


def md5(path: os.PathLike) -> str:
  h = hashlib.md5()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


def check_file(path: pathlib.Path, expected_md5: str) -> None:
  got = md5(path)
  if got != expected_md5:
    raise DataError(
        f"{path} is corrupt, truncated or not the expected file (md5 {got}, expected "
        f"{expected_md5}); delete it to re-download, or replace it with the original file")


def download(urls: Sequence[str], dest: pathlib.Path, expected_md5: str,
             timeout: float = 30.0) -> pathlib.Path:
  """Fetch the first URL that yields the right bytes into ``dest``.

  Writes to a temporary name in the same folder and renames only after the checksum matches, so an
  interrupted or corrupt transfer never leaves a file that looks valid.
  """
  dest.parent.mkdir(parents=True, exist_ok=True)
  errors = []
  for url in urls:
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
      with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
        for chunk in iter(lambda: resp.read(1 << 20), b""):
          out.write(chunk)
      got = md5(tmp)
      if got != expected_md5:
        raise DataError(f"md5 {got}, expected {expected_md5}")
      os.replace(tmp, dest)
      return dest
    except (OSError, http.client.HTTPException, DataError) as e:
      # OSError covers URLError and timeouts; HTTPException covers IncompleteRead, which is what a
      # server that dies mid-transfer gives.
      errors.append(f"{url}: {type(e).__name__}: {e}")
    finally:
      if os.path.exists(tmp):
        os.remove(tmp)
  raise DataError(f"could not download {dest.name} ({'; '.join(errors)})")


def _roots(data_dir: os.PathLike | None) -> list[pathlib.Path]:
  roots = [data_dir, os.environ.get(ENV_VAR) or None, cache_dir()]
  return [pathlib.Path(r).expanduser() for r in roots if r is not None]


def locate(dataset: str, filename: str, data_dir: os.PathLike | None = None,
           mirrors: Sequence[str] | None = None) -> pathlib.Path:
  """The verified path of one file of ``dataset``, downloading it into the cache if need be."""
  folder, default_mirrors, md5s = DATASETS[dataset]
  expected = md5s[filename]
  roots = _roots(data_dir)
  for root in roots:
    for path in (root / folder / filename, root / filename):
      if path.is_file():
        check_file(path, expected)
        return path
  dest = cache_dir() / folder / filename
  env_mirrors = [m for m in os.environ.get(MIRRORS_VAR, "").split(",") if m.strip()]
  urls = [m.strip().rstrip("/") + "/" + filename
          for m in (mirrors or env_mirrors or default_mirrors)]
  try:
    return download(urls, dest, expected)
  except DataError as e:
    searched = ", ".join(str(r / folder) for r in roots)
    raise DataError(f"{dataset} file {filename} not found in {searched} and {e}; pass --data_dir "
                    f"or set {ENV_VAR} to a folder holding it") from None


def parse_idx(path: pathlib.Path, ndim: int) -> np.ndarray:
  """Read a gzip IDX file of uint8 values into an array of ``ndim`` dimensions."""
  with gzip.open(path, "rb") as f:
    raw = f.read()
  magic, = struct.unpack(">I", raw[:4])
  if magic != _IDX_MAGIC[ndim]:
    raise DataError(f"{path} is not an IDX file of {ndim} dimension(s) (magic {magic})")
  shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
  data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
  if data.size != int(np.prod(shape)):
    raise DataError(f"{path} holds {data.size} values, its header says {shape}")
  return data.reshape(shape)


def load(dataset: str = "mnist", data_dir: os.PathLike | None = None,
         mirrors: Sequence[str] | None = None) -> Dataset:
  """Load ``dataset`` ('mnist' or 'fashion') as uint8 arrays; see the module docstring."""
  if dataset not in DATASETS:
    raise DataError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
  if data_dir is not None and not pathlib.Path(data_dir).expanduser().is_dir():
    # A folder the user named is never silently replaced by another source.
    raise DataError(f"data_dir {data_dir} does not exist or is not a folder")
  get = lambda name, ndim: parse_idx(locate(dataset, name, data_dir, mirrors), ndim)
  return Dataset(
      train_images=get("train-images-idx3-ubyte.gz", 3),
      train_labels=get("train-labels-idx1-ubyte.gz", 1),
      test_images=get("t10k-images-idx3-ubyte.gz", 3),
      test_labels=get("t10k-labels-idx1-ubyte.gz", 1),
  )
