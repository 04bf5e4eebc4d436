"""How often two float32 trainings of equal accuracy pass the breadth issue's float64 parity
criterion (B's distance from the float64 epoch at most twice A's plus 1e-6 relative), and how
often B passes with compensated (Kahan) weight updates. MLP 784-256-10, batch 64, SGD lr 0.5,
MNIST, one epoch from the same float64 weights (lockstep's first epoch), seeds given.
A: float32, the batch's gradient in one sum (XLA's arithmetic on the CPU). B: float32, the
gradient as the sum of two half-batches' (another order of the same sums, as a kernel's)."""
import sys
import jax, jax.numpy as jnp, numpy as np
from jax import lax
jax.config.update("jax_enable_x64", True)
from jaxshallow import data, mlp, train

ds = data.load("mnist")  # (the project's data folder: JAXSHALLOW_DATA_DIR, or its cache)
X = np.asarray(ds.train_images, np.float64).reshape(len(ds.train_labels), -1) / 255.0
Y = np.asarray(ds.train_labels)
B, LR = 64, 0.5
steps = len(Y) // B

def loss(p, x, y):
  z = jnp.maximum(x @ p[0] + p[1], 0.0)
  logits = z @ p[2] + p[3]
  return jnp.sum(jax.nn.logsumexp(logits, axis=1)
                 - jnp.take_along_axis(logits, y[:, None], 1)[:, 0]) / B

def epoch(p, order, dt, halves, kahan):
  x_all, y_all = jnp.asarray(X, dt), jnp.asarray(Y)
  p = [jnp.asarray(a, dt) for a in p]
  def step(carry, idx):
    p, c = carry
    x, y = x_all[idx], y_all[idx]
    if halves:
      h = B // 2
      (l1, g1), (l2, g2) = (jax.value_and_grad(loss)(p, x[s], y[s])
                            for s in (slice(0, h), slice(h, B)))
      l, g = l1 + l2, [a + b for a, b in zip(g1, g2)]
    else:
      l, g = jax.value_and_grad(loss)(p, x, y)
    if kahan:
      yv = [-LR * gi - ci for gi, ci in zip(g, c)]
      t = [w + v for w, v in zip(p, yv)]
      return (t, [(ti - w) - v for ti, w, v in zip(t, p, yv)]), l
    return ([w - LR * gi for w, gi in zip(p, g)], c), l
  (p, _), ls = lax.scan(step, (p, [jnp.zeros_like(a) for a in p]),
                        jnp.asarray(order[:steps * B].reshape(steps, B)))
  return jnp.mean(ls.astype(jnp.float64))

run = jax.jit(epoch, static_argnums=(2, 3, 4))
rows = []
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
  params = mlp.init_mlp(jax.random.key(seed), (784, 256, 10), dtype=jnp.float64)
  p = [params[0]["w"], params[0]["b"], params[1]["w"], params[1]["b"]]
  order = train.epoch_order(seed, 0, len(Y))
  ref = float(run(p, order, jnp.float64, False, False))
  d = {name: abs(float(run(p, order, jnp.float32, h, k)) - ref) / abs(ref)
       for name, h, k in (("A", False, False), ("B", True, False), ("B+kahan", True, True))}
  ok = lambda b: d[b] <= 2 * d["A"] + 1e-6
  rows.append((ok("B"), ok("B+kahan")))
  print(f"seed {seed}: A {d['A']:.2e}  B {d['B']:.2e} ({'pass' if ok('B') else 'MISS'})  "
        f"B+kahan {d['B+kahan']:.2e} ({'pass' if ok('B+kahan') else 'MISS'})", flush=True)
print(f"passed: B {sum(r[0] for r in rows)}/{len(rows)}, "
      f"B+kahan {sum(r[1] for r in rows)}/{len(rows)}")
