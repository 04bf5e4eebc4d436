"""Where softmax regression's cold compile goes (jax 0.11.2): the grid epoch kernel alone,
lowered and compiled apart; its Triton IR compiled by Triton 3.6's own pipeline; cProfile of
a cold `experiments.mnist --model=logreg --impl=pallas --epochs=1`."""
import functools, re, sys, time, os, subprocess
import jax, jax.numpy as jnp
from pallas_kernels.fused import mlp_epoch
from jaxshallow import init_mlp
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
widths, batch, steps = (784, 10), 64, 937
plan = mlp_epoch.make_plan(widths, batch, steps, max_programs=132)
print(plan, flush=True)
x, y = jnp.zeros((60000, 784), jnp.uint8), jnp.zeros(60000, jnp.int32)
f = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan, fused=True))
args = (init_mlp(jax.random.key(0), widths), None, x, y, jnp.arange(60000, dtype=jnp.int32), 0.1, 0.0)
t = time.perf_counter(); lowered = f.trace(*args).lower(); t1 = time.perf_counter()
compiled = lowered.compile(); t2 = time.perf_counter()
print(f"kernel alone: lower {t1 - t:.2f} s, compile {t2 - t1:.2f} s", flush=True)
from jax._src.lib.mlir import ir
mod = lowered.compiler_ir("stablehlo"); found = []
def walk(op):
  for region in op.regions:
    for block in region:
      for o in block:
        if o.operation.name == "stablehlo.custom_call": found.append(o)
        walk(o.operation)
walk(mod.operation)
from jax._src.lib import triton as jt
for o in found:
  data = bytes(ir.StringAttr(o.attributes["mhlo.backend_config"]["ir"]).value_bytes)
  ctx = ir.Context(); jt.dialect.register_dialect(ctx)
  with ctx:
    ctx.allow_unregistered_dialects = True
    s = ir.Module.parse(data).operation.get_asm(enable_debug_info=False)
  s = re.sub(r'"gpu\.barrier"\(\) <loc\(.*?\)> : \(\) -> \(\)', 'gpu.barrier', s)
  s = re.sub(r' loc\(#loc\d*\)', '', s)
  open("/tmp/k.ttir", "w").write(s)
  r = subprocess.run([sys.executable, "-c", """
import time, triton
from triton.backends.compiler import GPUTarget
t = time.perf_counter()
k = triton.compile('/tmp/k.ttir', target=GPUTarget('cuda', 90, 32), options={'num_warps': 4, 'num_stages': 1})
print('triton 3.6 pipeline s', round(time.perf_counter() - t, 2))"""], capture_output=True, text=True)
  print(r.stdout.strip(), r.stderr.strip()[-300:], flush=True)
