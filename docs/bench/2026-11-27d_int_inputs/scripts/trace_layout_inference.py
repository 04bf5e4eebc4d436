import time, sys, collections, jax, jax.numpy as jnp
from jax.experimental.mosaic.gpu import layout_inference as li, constraints as cs
stats = collections.Counter(); path = []; reduce_t = [0.0]
orig_reduce = cs.reduce
def timed_reduce(s):
  t = time.perf_counter(); r = orig_reduce(s); reduce_t[0] += time.perf_counter() - t; stats["reduce"] += 1; return r
cs.reduce = timed_reduce
def find(unknowns, system, *, fuel, arch, depth=0):
  if isinstance(result := cs.reduce(system), cs.Unsatisfiable):
    return cs.Unsatisfiable(), fuel
  system = result
  remaining = [u for u in unknowns if u not in system.assignments]
  if not remaining:
    return {v: k for v, k in system.assignments.items() if v in unknowns}, fuel
  tried = 0
  for variable, expr in li.conjure_assignment(remaining, system, arch):
    if not cs.is_valid_assignment(variable, expr): continue
    fuel -= 1; tried += 1; stats["guesses"] += 1
    new = cs.ConstraintSystem(assignments={variable: expr}) & system
    if isinstance(new, cs.Unsatisfiable): stats["immediate_unsat"] += 1; continue
    sol, fuel = find(unknowns, new, fuel=fuel, arch=arch, depth=depth + 1)
    if not isinstance(sol, cs.Unsatisfiable):
      path.append((depth, tried, variable, expr, len(remaining), str(variable.key.operation.location), str(variable.key), str(variable.shape))); return sol, fuel
    stats["backtracks"] += 1
  return cs.Unsatisfiable(), fuel
li.find_assignments_for = find
from pallas_kernels.fused import cluster_mlp_mgpu
import os
if os.environ.get("NOCAST"):
  from jax.experimental.pallas import mosaic_gpu as plgpu
  cluster_mlp_mgpu._load = lambda ref, layout: plgpu.load(ref, optimized=False) if os.environ["NOCAST"] == "all" or layout != plgpu.Layout.WGMMA else plgpu.load(ref, layout=layout, optimized=False)
f32 = jnp.float32
layer = lambda n, m: {"w": jax.ShapeDtypeStruct((n, m), f32), "b": jax.ShapeDtypeStruct((m,), f32)}
fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, sys.argv[1] if len(sys.argv) > 1 else "float32"))
t = time.perf_counter()
fn.trace([layer(784, 256), layer(256, 10)], jax.ShapeDtypeStruct((937, 64, 832), jnp.bfloat16),
         jax.ShapeDtypeStruct((937, 10, 64), jnp.bfloat16)).lower(lowering_platforms=("cuda",))
print(f"lowered in {time.perf_counter() - t:.1f} s; reduce {reduce_t[0]:.1f} s", dict(stats))
import re
groups = collections.Counter(); tries = collections.Counter()
for depth, tried, var, expr, rem, loc, sitestr, shape in sorted(path, key=lambda p: p[0]):
  m = re.findall(r'"(/work/main/[^"]+)":(\d+)', loc)
  where = " < ".join(f"{f.split('/')[-1]}:{l}" for f, l in m[:3])
  kind = re.sub(r"%\d+ = ", "", sitestr)[:50]
  key = (where, kind, shape, str(expr)[:140])
  groups[key] += 1; tries[key] += tried - 1
for key, n in groups.most_common(12):
  print(n, "guesses; wrong first tries", tries[key], "|", " | ".join(key))
