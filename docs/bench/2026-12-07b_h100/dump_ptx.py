"""One small launch of a Hopper epoch kernel, to dump its PTX (run with MOSAIC_GPU_DUMP_PTX=1
MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO=dir; read where its wgmma descriptors are built with
``python -m probes.spills``, on any machine): cluster_mlp (the MLP reference 784-256-10, batch
64, float32), tile_mlp (784-256-1024-256-10) or logreg (784-10).

  PYTHONPATH=. python docs/bench/next/dump_ptx.py cluster_mlp
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jaxshallow import mlp
from pallas_kernels.fused import cluster_mlp_mgpu, logreg_mgpu, tile_mlp_mgpu

KERNELS = {"cluster_mlp": (cluster_mlp_mgpu, (784, 256, 10)),
           "tile_mlp": (tile_mlp_mgpu, tile_mlp_mgpu.WIDTHS),
           "logreg": (logreg_mgpu, (784, 10))}
kernel, widths = KERNELS[sys.argv[1]]
rng, steps = np.random.default_rng(0), 3
n = steps * 64 + 7
x = jnp.asarray(rng.integers(0, 256, (n, 784)).astype(np.uint8))
y = jnp.asarray(rng.integers(0, 10, n))
order = jnp.asarray(rng.permutation(n).astype(np.int32))
params = mlp.init_mlp(jax.random.key(0), widths)
xs, onehot = kernel.batches(x, y, order, steps)
out = jax.jit(lambda p, a, b: kernel.train_steps(p, a, b, 0.1))(params, xs, onehot)
print(sys.argv[1], jax.devices()[0].device_kind, "losses", np.asarray(out[1]))
