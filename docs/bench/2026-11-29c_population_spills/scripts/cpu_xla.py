"""On the CPU (jax 0.10.2): xla's float32 train steps on the failing draw (--seed=896467452, 20 steps,
one set of batches), each member's distance from float64, per step and by leaf; then from
weights nudged by one float32 ulp (random signs), four times a member."""
import sys, numpy as np, jax, jax.numpy as jnp
from experiments import check_kernels as ck
from jaxshallow import models
rng = np.random.default_rng(896467452)
for steps, shared in ck.STREAM_POPULATION_CASES:
  draws = [ck._mlp_inputs(rng, (784, 256, 10), steps, 64) for _ in range(3)]
  if not shared: continue
  x, y = draws[0][0], draws[0][1]
  for i, lr in enumerate([0.05, 0.1, 0.2]):
    inputs = (draws[i][3], x, y, draws[0][2], lr, "sgd", 64, models.MLP, steps)
    ref = ck._epoch_reference(*inputs)
    l32, p32 = ck._epoch_reference(*inputs, float64=False)
    print(i, "xla cpu", ck._distance(l32, p32, *ref), "losses", [f"{a:.3g}" for a in ref[0]])
    print("  per step loss rel", [f"{abs(a-b)/abs(b):.1e}" for a, b in zip(l32, ref[0])])
    print("  leaves", [f"{ck.rel_err(a,b):.1e}" for a, b in zip(p32, ref[1])])
print("perturbed")
for i, lr in enumerate([0.05, 0.1, 0.2]):
  inputs = (draws[i][3], x, y, draws[0][2], lr, "sgd", 64, models.MLP, steps)
  ref = ck._epoch_reference(*inputs)
  for t in range(4):
    pert = jax.tree.map(lambda a: a * (1 + 2**-23 * jnp.asarray(rng.choice([-1.,1.], a.shape), a.dtype)), draws[i][3])
    print(i, t, f"{ck._distance(*ck._epoch_reference(pert, *inputs[1:], float64=False), *ref):.2e}")
