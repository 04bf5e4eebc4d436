"""The cluster kernel's shapes that jax 0.11 now compiles in Lane semantics (a step of four or
more passes, in four clusters; a network without clusters), against float64 train_step over 20
steps, bounded as check_kernels' cluster cases (twice xla's float32 distance where larger), and
run twice (the same bits). Checkout root, Hopper GPU."""
import functools

import jax
import numpy as np

from experiments import check_kernels as ck
from jaxshallow import models
from pallas_kernels.fused import cluster_mlp_mgpu as cm

print(jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
rng, lr, steps = np.random.default_rng(20261205), 0.1, 20
for hidden, batch in [(256, 256), (256, 512), (2048, 64)]:
  groups = -(-hidden // cm.HIDDEN)
  print(f"784-{hidden}-10 batch {batch}: {cm.semantics(batch // cm.BATCH, cm._flat(groups))}",
        flush=True)
  run = jax.jit(functools.partial(cm.train_epoch, lr=lr, steps=steps, batch=batch))
  x, y, order, params = ck._cluster_inputs(rng, hidden, steps, batch)
  got, losses, _ = run(params, x, y, order)
  inputs = (params, x, y, order, lr, "sgd", batch, models.MLP, steps)
  ref = ck._epoch_reference(*inputs)
  bound, xla_err = ck._float32_bound(ref, *inputs)
  err = ck._distance(losses, jax.tree.leaves(got), *ref)
  same = ck._same_bits((got, losses), run(params, x, y, order)[:2])
  print(f"{'ok  ' if err < bound and same == 0 else 'FAIL'} 784-{hidden}-10 batch {batch} "
        f"{steps} steps: err {err:.2e} (xla {xla_err:.0e}, bound {bound:.0e}) twice {same:.1e}",
        flush=True)
