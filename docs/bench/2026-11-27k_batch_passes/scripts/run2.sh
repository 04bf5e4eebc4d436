#!/bin/bash
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
cat > /tmp/spill.py <<'PY'
import functools, sys, numpy as np, jax, jax.numpy as jnp
from jaxshallow import mlp
from pallas_kernels.fused import cluster_mlp_mgpu as cm
batch, precision = int(sys.argv[1]), sys.argv[2]
n = 4 * batch
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (n, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
params = mlp.init_mlp(jax.random.key(0), (784, 256, 10))
f = jax.jit(functools.partial(cm.train_epoch, lr=0.1, steps=4, batch=batch, precision=precision))
jax.block_until_ready(f(params, x, y, jnp.arange(n, dtype=jnp.int32)))
PY
for c in "64 float32" "128 float32" "128 tf32"; do
  echo "== $c"; MOSAIC_GPU_DUMP_PTXAS=1 timeout 100 python3 /tmp/spill.py $c 2>&1 | grep -iE "spill|registers|Used [0-9]+ reg" | head -6
done
timeout 200 python3 .device/batch_time.py tf32 64,128,256 2>&1 | grep -v "^W\|^I0" | tail -4
timeout 200 python3 .device/batch_time.py bfloat16 64,128,256 2>&1 | grep -v "^W\|^I0" | tail -4
