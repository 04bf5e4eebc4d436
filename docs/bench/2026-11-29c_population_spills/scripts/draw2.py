"""The check's failing draw (--seed=896467452, 20 steps on one set of batches), member 2 (lr
0.2) departing from float64 at step 18 under every nudge (draw.py): does it follow the member's
values or its place? The same members reordered, member 2 alone, and the same batches given as
each member's own (D = 3, identical orders); each member's distance from float64, by leaf
(W0, b0, W1, b1; losses). Checkout root, Hopper GPU."""
import jax
import jax.numpy as jnp
import numpy as np

from experiments import check_kernels as ck
from jaxshallow import models
from pallas_kernels.fused import stream_population_mgpu as k

rng = np.random.default_rng(896467452)
for steps, shared in ck.STREAM_POPULATION_CASES:  # the check's draws, in its order
  draws = [ck._mlp_inputs(rng, (784, 256, 10), steps, k.BATCH) for _ in range(3)]
x, y, order = draws[0][0], draws[0][1], draws[0][2]
lrs = [0.05, 0.1, 0.2]
refs = [ck._epoch_reference(d[3], x, y, order, lr, "sgd", 64, models.MLP, 20)
        for d, lr in zip(draws, lrs)]
fn = jax.jit(k.train_steps)


def run(name, who, copies):
  params = jax.tree.map(lambda *a: jnp.stack(a), *[draws[i][3] for i in who])
  orders = np.stack([order] * copies)
  xs, onehot = k.batches(jnp.asarray(x), jnp.asarray(y), jnp.asarray(orders), 20)
  got, losses, _ = fn(params, jnp.float32([lrs[i] for i in who]), xs, onehot)
  leaves = jax.tree.leaves(got)
  for j, i in enumerate(who):
    by_leaf = [ck.rel_err(a[j], b) for a, b in zip(leaves, refs[i][1])]
    by_leaf.append(ck.rel_err(np.asarray(losses[j]), refs[i][0]))
    print(f"{name}: member {i} at {j}: " + " ".join(f"{e:.1e}" for e in by_leaf), flush=True)


run("shared, as drawn", [0, 1, 2], 1)
run("shared, reordered", [2, 0, 1], 1)
run("shared, member 2 alone", [2], 1)
run("shared, member 2 four times", [2, 2, 2, 2], 1)
run("own batches, all the same", [0, 1, 2], 3)
