import faulthandler, sys, time
faulthandler.dump_traceback_later(50, exit=True)
import jax, jax.numpy as jnp
from pallas_kernels.mgpu import grid_barrier
for programs, steps in [(2, 4), (16, 100), (132, 1000)]:
  t = time.perf_counter()
  f = grid_barrier.exchange(programs, steps, 128)
  c = f.lower().compile(); t1 = time.perf_counter()
  print(f"P={programs} steps={steps} compiled in {t1 - t:.1f} s", flush=True)
  out = jax.block_until_ready(c()); print("  ran in", f"{time.perf_counter() - t1:.2f} s, wrong", float(jnp.sum(out)), flush=True)
