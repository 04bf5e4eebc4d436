import functools, numpy as np, jax, jax.numpy as jnp, sys
from jaxshallow import mlp, models, train
from experiments import check_kernels as ck
nets = [((784, 256, 1024, 256, 10), 64, "sgd"), ((784, 512, 256, 10), 64, "adam"), ((784, 256, 10), 256, "momentum")]
for widths, batch, opt in nets:
  for lr in ((0.1, 0.03, 0.01) if opt != "adam" else (1e-3, 3e-4)):
    fails, errs = 0, []
    tx = train.make_optimizer(opt, lr); step = jax.jit(functools.partial(train.train_step, tx=tx, model=models.MLP))
    for seed in range(24):
      rng = np.random.default_rng(1000 + seed); n = 20 * batch + 5
      x = rng.integers(0, 256, (n, widths[0]), dtype=np.uint8); y = rng.integers(0, widths[-1], n).astype(np.int32)
      order = rng.permutation(n).astype(np.int32); params = mlp.init_mlp(jax.random.key(seed), widths)
      ref_l, ref_p = ck._epoch_reference(params, x, y, order, lr, opt, batch, models.MLP)
      p, s, ls, xs = params, tx.init(params), [], jnp.asarray(x, jnp.float32) / 255.0
      for k in range(20):
        idx = order[k * batch:(k + 1) * batch]; p, s, m = step(p, s, (xs[idx], y[idx])); ls.append(float(m["loss"]))
      err = max(ck.rel_err(np.array(ls), ref_l), *(ck.rel_err(a, b) for a, b in zip(jax.tree.leaves(p), ref_p)))
      errs.append(err); fails += err > 1e-5
    print(widths, batch, opt, lr, f"xla float32 fails {fails}/24, median err {np.median(errs):.1e}, max {max(errs):.1e}", flush=True)
