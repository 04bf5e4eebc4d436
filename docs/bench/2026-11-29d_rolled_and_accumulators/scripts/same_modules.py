"""dense_mgpu's Mosaic GPU modules (lowered for CUDA on the CPU, without debug info) as landed against
main's (0365671, .data/old/dense_mgpu.py) and the form measured on the device (db49308,
.data/old/dense_mgpu_measured.py): tf32 and bfloat16 should be main's, 3xTF32 the measured one."""
import importlib.util, sys
import jax, jax.numpy as jnp
from jax.experimental.mosaic.gpu import core
texts = []
orig = core._run_serde_pass
def grab(module, **kw):
  if kw.get("serialize"):
    import re; texts.append(re.sub(r'dump_basename = "[^"]*"', "", module.operation.get_asm(enable_debug_info=False)))
  return orig(module, **kw)
core._run_serde_pass = grab
def load(name, path):
  spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
  sys.modules[name] = m; spec.loader.exec_module(m); return m
from pallas_kernels.ops import dense_mgpu as new
old, measured = load("old", ".data/old/dense_mgpu.py"), load("measured", ".data/old/dense_mgpu_measured.py")
def text(mod, dtype, x3, bias, tiles):
  texts.clear()
  a = jax.ShapeDtypeStruct((8192, 832), dtype); b = jax.ShapeDtypeStruct((256, 832), dtype)
  args = ((a, a), (b, b)) if x3 else (a, b)
  bb = (jax.ShapeDtypeStruct((256,), jnp.float32),) if bias else ()
  f = lambda a, b, *bb: mod.matmul_nt(a, b, *bb, relu=bias, tiles=tiles, num_sms=132)
  jax.jit(f).trace(*args, *bb).lower(lowering_platforms=("cuda",))
  assert len(texts) == 1, len(texts)
  return texts[0]
for dt in (jnp.float32, jnp.bfloat16):
  for bias in (True, False):
    print("single", dt.__name__, bias, "new == main:", text(old, dt, False, bias, new.FWD_TILES) == text(new, dt, False, bias, new.FWD_TILES))
for bias, tiles in ((True, new.X3_FWD_TILES), (False, new.X3_DW_TILES)):
  print("x3", bias, "new == measured:", text(measured, jnp.float32, True, bias, tiles) == text(new, jnp.float32, True, bias, tiles),
        "new == main:", text(old, jnp.float32, True, bias, tiles) == text(new, jnp.float32, True, bias, tiles))
