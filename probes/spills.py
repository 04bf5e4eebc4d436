"""Where a Mosaic GPU kernel's register spills sit, read on any machine from the PTX that
``MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=dir`` wrote on the GPU: ptxas assembles it for
sm_90a, cuobjdump lists its SASS, and the spill stores and loads (STL, LDL) are counted by how
many tensor-core products (HGMMA) come before them, which places them in a kernel's walk of
tiles; and where the PTX builds its wgmma descriptors (``descriptors``: built before the
step's loop, they are held across it, or spilled). ptxas and cuobjdump (which runs nvdisasm):
the ones an installed triton wheel carries (``triton/backends/nvidia/bin``), or ``--bin`` (for
example from the ``nvidia-cuda-nvcc``, ``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm``
wheels).

  python -m probes.spills --ptx=/path/to/anonymous_0.ptx

The PTX's ISA version is lowered to what that ptxas reads (the device's newer ptxas may
allocate a little differently: 256 / 852 spilled bytes here against 316 / 1172 there for the
same PTX, 2026-11-29).
"""

import collections
import os
import re
import subprocess
import sys
import tempfile

from absl import app, flags

FLAGS = flags.FLAGS


def define_flags():  # (at run time only: a test imports this module's functions)
  flags.DEFINE_string("ptx", None, "The kernel's PTX file.", required=True)
  flags.DEFINE_string("bin", None, "A folder with ptxas and cuobjdump (default: triton's).")
  flags.DEFINE_string("arch", "sm_90a", "The GPU architecture to assemble for.")


def tools_folder() -> str:
  """Where ptxas and cuobjdump are: --bin, else an installed triton's."""
  if FLAGS.bin:
    return FLAGS.bin
  try:
    import triton
  except ImportError:
    sys.exit("error: no --bin and no triton installed: give --bin=<folder with ptxas, cuobjdump>")
  return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


def by_products(sass: str):
  """(kind, products before it) for each STL and LDL of a SASS listing, in order."""
  products, found = 0, []
  for line in sass.splitlines():
    if "HGMMA" in line:
      products += 1
    elif (m := re.search(r"\b(STL|LDL)(\.[A-Z0-9.]+)?\s", line)):
      found.append((m.group(1), products))
  return products, found


def tally(found):
  """How many spills of each kind follow each number of products: [(kind, products, n)], in
  the order of the products."""
  counts = collections.Counter(found)
  return [(kind, at, counts[kind, at]) for kind, at in sorted(counts, key=lambda c: (c[1], c[0]))]


def longest_loop(lines):
  """(first, last) line of the PTX's widest backward branch (a label and the branch back to
  it): a kernel's step loop; (-1, -1) if it has none."""
  labels = {m.group(1): i for i, line in enumerate(lines)
            if (m := re.match(r"^(\$L__BB\d+_\d+):", line))}
  loops = [(labels[m.group(1)], i) for i, line in enumerate(lines)
           if (m := re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);", line))
           and labels.get(m.group(1), i) < i]
  return max(loops, key=lambda loop: loop[1] - loop[0], default=(-1, -1))


def built_descriptor(line: str):
  """The register a PTX line builds a wgmma descriptor into, or None: ``or.b64``/``add.s64``
  of an immediate whose top bits are a swizzle mode (2**62 or more, printed negative from
  2**63)."""
  m = re.search(r"\b(?:or|add)\.[bs]64\s+(%rd\d+),\s*%rd\d+,\s*(-?\d+);", line)
  return m.group(1) if m and int(m.group(2)) % (1 << 64) >= 1 << 62 else None


def descriptors(ptx: str):
  """Where a Mosaic GPU kernel's PTX builds the wgmma descriptors of the products in its
  longest loop (``longest_loop``): (built inside the loop, built before it, the loop's
  products). A descriptor (``built_descriptor``) built before the loop is held in a register
  across it, or spilled."""
  lines = ptx.splitlines()
  first, last = longest_loop(lines)
  inside, before, used, products = set(), set(), set(), 0
  for i, line in enumerate(lines):
    in_loop = first <= i <= last
    if (register := built_descriptor(line)):
      (inside if in_loop else before).add(register)
    elif in_loop and "wgmma.mma_async" in line:
      products += 1
      used.update(re.findall(r"%rd\d+", line.split("}", 1)[-1]))
  return len(inside & used), len(before & used), products


def main(argv):
  del argv
  if not os.path.isfile(FLAGS.ptx):
    sys.exit(f"error: --ptx {FLAGS.ptx}: no such file")
  tools = tools_folder()
  for tool in ("ptxas", "cuobjdump"):
    if not os.access(os.path.join(tools, tool), os.X_OK):
      sys.exit(f"error: no {tool} in {tools}: give --bin=<folder with ptxas, cuobjdump>")
  with open(FLAGS.ptx) as f:
    ptx = f.read()
  with tempfile.TemporaryDirectory() as tmp:
    src, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
    for _ in range(2):  # As dumped, then at the ISA version this ptxas says it reads
      with open(src, "w") as f:
        f.write(ptx)
      done = subprocess.run([os.path.join(tools, "ptxas"), f"-arch={FLAGS.arch}", "-v", src,
                             "-o", cubin], capture_output=True, text=True)
      newest = re.search(r"current version is '([\d.]+)'", done.stderr)
      if done.returncode == 0 or not newest:
        break
      ptx = re.sub(r"^\.version \S+", f".version {newest.group(1)}", ptx, count=1, flags=re.M)
    if done.returncode:
      sys.exit(f"error: ptxas failed: {done.stderr.strip().splitlines()[-1]}")
    report = done.stderr
    done = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", cubin],
                          capture_output=True, text=True,  # (it runs nvdisasm, found on PATH)
                          env=dict(os.environ, PATH=tools + os.pathsep + os.environ["PATH"]))
    if done.returncode:
      sys.exit(f"error: cuobjdump failed: {(done.stderr.strip() or '?').splitlines()[-1]}")
    sass = done.stdout
  for line in report.splitlines():
    if re.search(r"spill|Used \d+ registers|serializ", line):
      print(line.strip())
  inside, before, loop_products = descriptors(ptx)
  print(f"the longest loop's {loop_products} wgmma: descriptors built inside it {inside}, "
        f"before it {before} (held across it, or spilled)")
  products, found = by_products(sass)
  print(f"{products} tensor-core products (HGMMA); "
        f"{sum(k == 'STL' for k, _ in found)} spill stores, "
        f"{sum(k == 'LDL' for k, _ in found)} spill loads; by the products before them:")
  for kind, at, n in tally(found):
    print(f"  {n:3d} {kind} after {at} products")


if __name__ == "__main__":
  define_flags()
  app.run(main)
