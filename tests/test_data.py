"""Data loading: the real files, checksums, and downloads from a local HTTP server."""

import gzip
import hashlib
import http.server
import pathlib
import shutil
import struct
import threading

import numpy as np
import pytest

from jaxshallow import data

PAYLOAD = gzip.compress(struct.pack(">IIII", 2051, 3, 2, 2) + bytes(range(12)))
PAYLOAD_MD5 = hashlib.md5(PAYLOAD).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
  """/good/F serves PAYLOAD (or a file of ``files_dir`` if F names one), /corrupt/F flips a
  byte of it, /dies/F promises the whole file and hangs up halfway, anything else is a 404."""
  files_dir: pathlib.Path | None = None

  def do_GET(self):  # noqa: N802
    kind, _, name = self.path.strip("/").partition("/")
    body = PAYLOAD
    if self.files_dir is not None and (self.files_dir / name).is_file():
      body = (self.files_dir / name).read_bytes()
    if kind not in ("good", "corrupt", "dies"):
      self.send_error(404)
      return
    if kind == "corrupt":
      body = body[:-1] + bytes([body[-1] ^ 0xFF])
    self.send_response(200)
    self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    if kind == "dies":
      self.wfile.write(body[:len(body) // 2])
      self.wfile.flush()
      self.close_connection = True
      return
    self.wfile.write(body)

  def log_message(self, *args):
    pass


@pytest.fixture
def server():
  """A local server on 127.0.0.1 (bounded: it serves only this test's few requests)."""
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{httpd.server_address[1]}"
  httpd.shutdown()
  httpd.server_close()
  Handler.files_dir = None


def leftovers(folder: pathlib.Path):
  return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_download_good(server, tmp_path):
  dest = tmp_path / "f.gz"
  data.download([f"{server}/good/f.gz"], dest, PAYLOAD_MD5)
  assert dest.read_bytes() == PAYLOAD
  assert leftovers(tmp_path) == ["f.gz"]


@pytest.mark.parametrize("kind", ["corrupt", "dies", "missing"])
def test_failed_download_leaves_nothing(server, tmp_path, kind):
  dest = tmp_path / "f.gz"
  with pytest.raises(data.DataError) as e:
    data.download([f"{server}/{kind}/f.gz"], dest, PAYLOAD_MD5)
  assert "f.gz" in str(e.value) and "\n" not in str(e.value)
  assert leftovers(tmp_path) == []  # Neither the file nor a temporary part of it.


def test_download_falls_back_to_next_mirror(server, tmp_path):
  dest = tmp_path / "f.gz"
  data.download([f"{server}/dies/f.gz", f"{server}/corrupt/f.gz", f"{server}/good/f.gz"], dest,
                PAYLOAD_MD5)
  assert dest.read_bytes() == PAYLOAD and leftovers(tmp_path) == ["f.gz"]


def test_unreachable_mirror_is_one_line_error(tmp_path, monkeypatch):
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  monkeypatch.delenv(data.ENV_VAR, raising=False)
  with pytest.raises(data.DataError) as e:
    (tmp_path / "empty").mkdir()
    data.load("mnist", tmp_path / "empty", mirrors=["http://127.0.0.1:9/"])  # Port 9: discard.
  msg = str(e.value)
  assert "train-images-idx3-ubyte.gz" in msg and "--data_dir" in msg and "\n" not in msg


def test_parse_idx(tmp_path):
  path = tmp_path / "x.gz"
  path.write_bytes(PAYLOAD)
  arr = data.parse_idx(path, 3)
  assert arr.shape == (3, 2, 2) and arr.dtype == np.uint8
  assert arr.ravel().tolist() == list(range(12))
  with pytest.raises(data.DataError):
    data.parse_idx(path, 1)


def test_real_files(real_data_dir):
  for name, n_classes in (("mnist", 10), ("fashion", 10)):
    ds = data.load(name, real_data_dir)
    assert ds.train_images.shape == (60000, 28, 28) and ds.train_images.dtype == np.uint8
    assert ds.test_images.shape == (10000, 28, 28) and ds.test_labels.dtype == np.uint8
    assert ds.train_labels.shape == (60000,)
    counts = np.bincount(ds.train_labels, minlength=n_classes)
    assert counts.sum() == 60000 and len(counts) == n_classes
    if name == "mnist":  # The well-known class counts of MNIST's training set.
      assert counts.tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
      assert np.bincount(ds.test_labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958,
                                                      1028, 974, 1009]
    else:  # Fashion-MNIST is balanced.
      assert set(counts.tolist()) == {6000}


def test_corrupt_local_file_is_reported(real_data_dir, tmp_path):
  folder = tmp_path / "mnist"
  folder.mkdir()
  for f in (real_data_dir / "mnist").glob("*.gz"):
    shutil.copy(f, folder)
  victim = folder / "train-labels-idx1-ubyte.gz"
  victim.write_bytes(victim.read_bytes()[:1000])  # Truncated.
  with pytest.raises(data.DataError) as e:
    data.load("mnist", tmp_path)
  assert str(victim) in str(e.value) and "\n" not in str(e.value)


def test_download_real_files_into_cache(server, real_data_dir, tmp_path, monkeypatch):
  Handler.files_dir = real_data_dir / "mnist"
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  monkeypatch.delenv(data.ENV_VAR, raising=False)
  ds = data.load("mnist", mirrors=[f"{server}/dies/", f"{server}/good/"])
  assert ds.train_images.shape == (60000, 28, 28)
  cached = tmp_path / "cache" / "jaxshallow" / "mnist"
  assert leftovers(cached) == sorted(data.DATASETS["mnist"][2])
  # A second load needs no server: the cache is found and verified.
  ds2 = data.load("mnist", mirrors=["http://127.0.0.1:9/"])
  np.testing.assert_array_equal(ds.test_labels, ds2.test_labels)
