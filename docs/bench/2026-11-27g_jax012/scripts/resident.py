"""How many clusters of K CTAs (one CTA a SM: 200 KB of shared memory each) are resident at once:
a grid barrier across N clusters opens only if all are (else the child hangs, killed at 30 s)."""
import subprocess, sys, time
if len(sys.argv) == 3:
  K, N = int(sys.argv[1]), int(sys.argv[2])
  import jax, jax.numpy as jnp
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu
  f32 = jnp.float32
  def body(out_ref, big, row):
    counter = pl.get_global(plgpu.SemaphoreType.REGULAR((1,)))
    plgpu.semaphore_signal(counter.at[0], 1, memory_scope="gpu")
    plgpu.semaphore_wait(counter.at[0], N * K, decrement=False, memory_scope="gpu")
    row[...] = jnp.full((128,), 1.0, f32)
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(row, out_ref.at[jax.lax.axis_index("g") * K + jax.lax.axis_index("cta")])
    plgpu.wait_smem_to_gmem(0)
  call = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((N * K, 128), f32), grid=(N,), grid_names=("g",),
                      cluster=(K,), cluster_names=("cta",),
                      scratch_types=[plgpu.SMEM((200 * 1024 // 4,), f32), plgpu.SMEM((128,), f32)])
  out = jax.block_until_ready(jax.jit(call)())
  print("sum", float(out.sum()), "of", N * K * 128, flush=True)
  sys.exit(0)
import jax
d = jax.devices()[0]; print(d.device_kind, "SMs", getattr(d, "core_count", None), flush=True)
for K, N in [(16, 7), (8, 16), (8, 15), (8, 14), (4, 33), (4, 32), (16, 8)]:
  t = time.perf_counter()
  try:
    r = subprocess.run([sys.executable, __file__, str(K), str(N)], capture_output=True, text=True, timeout=30)
    print(f"clusters of {K} x {N} ({K*N} CTAs): rc {r.returncode} {time.perf_counter()-t:.1f} s",
          r.stdout.strip()[-80:], r.stderr.strip().splitlines()[-1][-200:] if r.returncode else "", flush=True)
  except subprocess.TimeoutExpired:
    print(f"clusters of {K} x {N} ({K*N} CTAs): HANG (30 s)", flush=True)
