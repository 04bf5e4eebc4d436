"""For the next GPU session (after `git apply docs/bench/2026-11-27m_rowgroups_wip/rowgroups.patch`):
which of the rowgroups kernel's results are wrong. 20 steps of 784-256-10 at batch 256 in two
clusters against float64 train_step: the losses' and each parameter's relative error apart,
and the same for one cluster's passes (rowgroups=1) as the control; W0's error by 64-input tile
(the first warpgroup takes tiles 0-2 at float32, the second 3-12). Lane semantics with "lane"."""
import functools, sys
import numpy as np, jax, jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu
from experiments import check_kernels as ck
from jaxshallow import models
from pallas_kernels.fused import cluster_mlp_mgpu as cm
if sys.argv[1:2] == ["lane"]:
  cm.semantics = lambda: plgpu.LoweringSemantics.Lane
steps, batch, lr = 20, 256, 0.1
x, y, order, params = ck._cluster_inputs(np.random.default_rng(31), 256, steps, batch)
ref_losses, ref_params = ck._epoch_reference(params, x, y, order, lr, "sgd", batch, models.MLP, steps)
rel = lambda a, b: float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))
for rowgroups in (1, 2):
  got, losses, _ = jax.jit(functools.partial(cm.train_epoch, lr=lr, steps=steps, batch=batch,
                                             rowgroups=rowgroups))(params, x, y, order)
  names = ["W0", "b0", "W1", "b1"]
  errs = [rel(a, b) for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref_params))]
  print(f"rowgroups {rowgroups}: losses {rel(losses, ref_losses):.2e}  " +
        "  ".join(f"{n} {e:.2e}" for n, e in zip(names, errs)), flush=True)
  w0, w0_ref = np.asarray(got[0]["w"]), np.asarray(ref_params[0]["w"])
  print("  W0 by tile:", " ".join(f"{rel(w0[64 * t:64 * t + 64], w0_ref[64 * t:64 * t + 64]):.1e}"
                                  for t in range(13)), flush=True)
  print("  first steps' losses:", np.asarray(losses[:4]), "float64:", np.asarray(ref_losses[:4]), flush=True)
