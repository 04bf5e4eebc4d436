"""The MLP 784-256-10 at batch 8192 (float32, SGD, 20 epochs) with xla and with pallas, the
latter with dense_mgpu as now (an accumulator a K step) and as on main (0365671, one over all of
K; .data/old/dense_mgpu.py), in one process: median epoch, compile, accuracy and the path.
Checkout root, Hopper GPU, MNIST under $JAXSHALLOW_DATA_DIR."""

import importlib.util
import statistics
import sys

import jax

from jaxshallow.run import config, runner
from pallas_kernels.ops import dense_mgpu

spec = importlib.util.spec_from_file_location("dense_mgpu_main", ".data/old/dense_mgpu.py")
old = importlib.util.module_from_spec(spec)
sys.modules["dense_mgpu_main"] = old
spec.loader.exec_module(old)
new_matmul = dense_mgpu.matmul_nt
print(f"device {jax.devices()[0].device_kind}; jax {jax.__version__}", flush=True)
for rnd in range(2):
  for name, impl, matmul in (("xla", "xla", new_matmul), ("pallas, main's dense_mgpu", "pallas", old.matmul_nt),
                             ("pallas, an accumulator a K step", "pallas", new_matmul)):
    dense_mgpu.matmul_nt = matmul  # (dense_forward and dense_grads look it up when traced)
    cfg = config.Config(model="mlp", impl=impl, batch_size=8192, epochs=20,
                        compilation_cache="off")
    r = runner.run(cfg, log=lambda s: None)
    print(f"round {rnd}  {name:32s} epoch {1e3 * statistics.median(r['epoch_time_s']):7.3f} ms  "
          f"compile {r['compile_time_s']:5.1f} s  acc {100 * r['test_accuracy']:.2f} %  "
          f"path {r.get('fusion')}", flush=True)
