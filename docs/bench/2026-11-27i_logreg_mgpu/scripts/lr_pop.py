"""(Next session, after lr_gpu.py passes) populations of softmax regression on the H100: xla's
(population.train_epoch, vmap of the xla epoch) against logreg_mgpu.train_population (a CTA a
member), one process, per-member orders, 937 steps an epoch: ms an epoch and networks/s
(members / epoch time), median of 5 after a warm-up; member 0's mean loss on both sides."""
import functools, os, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
from jaxshallow import mlp, models, population
from pallas_kernels.fused import logreg_mgpu as k
if os.environ.get("LR_VARIANT"):  # a variant of lr_var.py: nab,split,sem,bare
  nab, split, sem, bare = os.environ["LR_VARIANT"].split(",")
  k.NO_AUTO_BARRIERS, k.SPLIT, k.SEMANTICS, k.BARE_SYNC = nab == "1", int(split), sem, bare == "1"
print(jax.devices()[0].device_kind, jax.__version__, os.environ.get("LR_VARIANT"), flush=True)
rng = np.random.default_rng(0)
x = jnp.asarray(rng.integers(0, 256, (60000, 784), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, 60000).astype(np.int32))
steps = 937


def timed(fn):
  jax.block_until_ready(fn()); ts = []
  for _ in range(5):
    t = time.perf_counter(); jax.block_until_ready(fn()); ts.append(time.perf_counter() - t)
  return statistics.median(ts)


for members in [int(m) for m in (sys.argv[1:] or ["8", "64", "132", "512"])]:
  seeds = list(range(members))
  params = population.init_params(lambda key: mlp.init_mlp(key, (784, 10)), seeds)
  orders = jnp.asarray(population.epoch_orders(seeds, 0, 60000))
  lrs = jnp.full((members,), 0.1, jnp.float32)
  state = population.init_opt_state("sgd", params)
  xla = jax.jit(functools.partial(population._epoch, optimizer="sgd", momentum=0.9,
                                  batch_size=64, impl="xla", model=models.LOGREG))
  t_xla = timed(lambda: xla(params, state, x, y, orders, lrs))
  loss_xla = float(xla(params, state, x, y, orders, lrs)[2]["loss"][0])

  @jax.jit
  def kernel(params, orders, lrs):
    xs, onehot = jax.vmap(lambda o: k.batches(x, y, o, steps))(orders)
    return k.train_population(params, xs, onehot, lrs)
  t_k = timed(lambda: kernel(params, orders, lrs))
  loss_k = float(jnp.mean(kernel(params, orders, lrs)[1][0]))
  print(f"{members:4d} members: xla {1e3 * t_xla:8.2f} ms ({members / t_xla:7.0f} networks/s, "
        f"loss {loss_xla:.4f}); logreg_mgpu {1e3 * t_k:8.2f} ms ({members / t_k:7.0f} "
        f"networks/s, loss {loss_k:.4f}); {t_xla / t_k:.2f}x", flush=True)
