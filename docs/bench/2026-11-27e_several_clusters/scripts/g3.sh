#!/bin/bash
# Call 3: the groups cases again at seed 12 (the chaotic 784-1000-10 draw now takes a second),
# 784-1792-10 (7 clusters: all resident?) against float64 and timed beside xla, the float64
# parity criterion at hidden 128/512/1024, and experiments.mnist at hidden 1000 (the CLI's path).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
cat > /tmp/groups.py <<'PY'
import functools, statistics, time
import numpy as np, jax, jax.numpy as jnp
from experiments import check_kernels as ck
from jaxshallow import models, train, init_mlp, make_optimizer
from pallas_kernels.fused import cluster_mlp_mgpu as c
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
for case, precision, err, *bound in ck.cluster_groups_cases(np.random.default_rng(12)):
  b = bound[0] if bound else ck.TOLERANCE[precision]
  print(f"{'ok  ' if err < b else 'FAIL'} {case:70s} err {err:.2e} bound {b:.1e}", flush=True)
rng = np.random.default_rng(13)
x, y, order, params = ck._cluster_inputs(rng, 1792, 20)
run = jax.jit(functools.partial(c.train_epoch, lr=0.1, steps=20))
got, losses, _ = run(params, x, y, order)
inputs = (params, x, y, order, 0.1, "sgd", 64, models.MLP, 20)
ref = ck._epoch_reference(*inputs); bound, xe = ck._float32_bound(ref, *inputs)
err = ck._distance(losses, jax.tree.leaves(got), *ref)
print(f"{'ok  ' if err < bound else 'FAIL'} cluster mlp 784-1792-10 (7 clusters) 20 steps (xla {xe:.0e}) err {err:.2e} bound {bound:.1e}", flush=True)
def timed(fn, *args):
  jax.block_until_ready(fn(*args)); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn(*args)); ts.append(time.perf_counter() - t)
  return statistics.median(ts)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8)); y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
order = jnp.asarray(rng.permutation(60000).astype(np.int32))
for hidden in (1792, 1000):
  p = init_mlp(jax.random.key(0), (784, hidden, 10)); tx = make_optimizer("sgd", 0.1)
  xla = jax.jit(functools.partial(train._epoch, tx=tx, batch_size=64, model=models.MLP))
  cl = jax.jit(functools.partial(c.train_epoch, lr=0.1, steps=937))
  print(f"784-{hidden}-10 epoch of 60000: xla {1e3 * timed(xla, p, tx.init(p), x, y, order):.2f} ms, "
        f"cluster kernel {1e3 * timed(cl, p, x, y, order):.2f} ms", flush=True)
PY
timeout 300 python3 /tmp/groups.py > $OUT/groups.log 2>&1; echo "groups rc $?"
grep -E "ok  |FAIL|Error|error|epoch of" $OUT/groups.log | tail -12
for p in "mlp hidden 512" "mlp hidden 1024" "mlp hidden 128"; do
  timeout 100 python3 -m experiments.parity --reference=float64 --seeds=0,1,2 --epochs=1 "--point=$p" \
    > "$OUT/parity_${p// /_}.log" 2>&1; echo "parity $p rc $?"; grep -v "^W\|^I0" "$OUT/parity_${p// /_}.log" | tail -4
done
timeout 90 python3 -m experiments.mnist --impl=pallas --hidden=1000 --epochs=2 > $OUT/mnist_1000.log 2>&1; echo "mnist rc $?"; grep -v "^I0" $OUT/mnist_1000.log | tail -6
