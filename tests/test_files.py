"""jaxshallow.files: written whole or not at all."""

import os

import pytest

from jaxshallow import files


def test_writes_text_and_bytes(tmp_path):
  files.write_atomically(tmp_path / "a" / "t.txt", "text\n")
  files.write_atomically(tmp_path / "b.bin", b"\x00\x01")
  assert (tmp_path / "a" / "t.txt").read_text() == "text\n"
  assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
  path = tmp_path / "r.json"
  path.write_text("old")

  def fail(*_):
    raise OSError("disk full")
  monkeypatch.setattr(os, "replace", fail)
  with pytest.raises(OSError):
    files.write_atomically(path, "new")
  assert path.read_text() == "old" and os.listdir(tmp_path) == ["r.json"]


def test_the_file_gets_the_umasks_permissions(tmp_path):
  """Not mkstemp's owner-only 0600: a result file is readable as any other file is."""
  old = os.umask(0o022)
  try:
    files.write_atomically(tmp_path / "r.json", "{}")
  finally:
    os.umask(old)
  assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
