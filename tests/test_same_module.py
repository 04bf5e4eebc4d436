"""probes.same_module: a kernel's Mosaic GPU modules, lowered on the CPU, the same for the same
code and settings, different for others (whether an edit changed what runs on the GPU)."""

import subprocess
import sys

from conftest import ROOT


def _run(*args):
  return subprocess.run([sys.executable, "-m", "probes.same_module", *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=600)


def test_the_same_kernel_is_identical_and_another_is_not(tmp_path):
  saved = tmp_path / "logreg.txt"
  p = _run("--kernel=logreg", f"--save={saved}")
  assert p.returncode == 0, p.stderr
  assert "mosaic_gpu" in saved.read_text() and "loc(" not in saved.read_text()
  p = _run("--kernel=logreg", f"--compare={saved}")
  assert p.returncode == 0 and "IDENTICAL" in p.stdout, p.stdout + p.stderr
  p = _run("--kernel=logreg", "--precision=bfloat16", f"--compare={saved}")
  assert p.returncode == 1 and "DIFFERENT" in p.stdout, p.stdout + p.stderr
