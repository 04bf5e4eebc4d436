"""cluster_mlp_mgpu at batch 128 and 256 (passes of 64) against float64: check_kernels' cases."""
import numpy as np, jax
from experiments import check_kernels as ck
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
for case, precision, err, *bound in ck.cluster_batch_cases(np.random.default_rng(21)):
  b = bound[0] if bound else ck.TOLERANCE[precision]
  print(f"{'ok  ' if err < b else 'FAIL'} {case:72s} {precision:9s} err {err:.2e} bound {b:.1e}", flush=True)
