"""Whether two lowerings of a Pallas Mosaic GPU kernel (the text of ``lower_text.py``, jax's
``lowered.as_text()``) hold the same Mosaic GPU module once its debug locations are dropped:
``python same_module.py before.mlir after.mlir``. A refactor of the kernel's Python that prints
IDENTICAL changed nothing that runs on the GPU (the module's bytes differ by line numbers)."""
import re, sys
def extract(path):
  t = open(path).read()
  m = re.search(r'module = "(.*?)", skip_device_barrier', t, re.S)
  s = m.group(1)
  out = bytearray(); i = 0
  while i < len(s):
    if s[i] == '\\':
      nxt = s[i+1]
      if nxt in '\\"':
        out.append(ord(nxt)); i += 2
      elif nxt in 'nt' and not all(ch in '0123456789ABCDEFabcdef' for ch in s[i+1:i+3]):
        out.append({'n': 10, 't': 9}[nxt]); i += 2
      else:
        out.append(int(s[i+1:i+3], 16)); i += 3
    else:
      out.append(ord(s[i])); i += 1
  return bytes(out)
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax.experimental.mosaic import gpu as mgpu  # registers its dialects
ctx = mlir.make_ir_context()
try:
  from jax.experimental.mosaic.gpu import dialect_lowering
except Exception:
  pass
from jax._src.lib import mosaic_gpu_dialect
mosaic_gpu_dialect.register_dialect(ctx)
ctx.allow_unregistered_dialects = True
texts = []
for p in sys.argv[1:]:
  with ctx:
    mod = ir.Module.parse(extract(p))
    texts.append(mod.operation.get_asm(enable_debug_info=False))
print(len(texts[0]), len(texts[1]), "IDENTICAL" if texts[0] == texts[1] else "DIFFERENT")
