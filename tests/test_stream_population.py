"""stream_population_mgpu (a population of MLPs 784-256-10, their weights streamed from global
memory every step) on the CPU: the kernel lowers for a Hopper GPU (Mosaic GPU's checks of
layouts, shared memory and copies run at lowering), its packing round-trips, and its jnp twin
follows the project's float64 training step member by member. It has not run on a GPU yet."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, train
from pallas_kernels.fused import stream_population_mgpu as k

SIZES = (784, 256, 10)


@pytest.mark.parametrize("members,steps,sets,warpgroups",
                         [(3, 2, 3, 2), (2, 1, 1, 2), (3, 2, 3, 1)],
                         ids=["own", "shared", "one-warpgroup"])
def test_kernel_lowers(members, steps, sets, warpgroups):
  f32, shape = jnp.float32, jax.ShapeDtypeStruct
  params = [{"w": shape((members, a, b), f32), "b": shape((members, b), f32)}
            for a, b in zip(SIZES[:-1], SIZES[1:])]
  args = (params, shape((members,), f32), shape((sets, steps, k.BATCH, k.INPUTS), jnp.bfloat16),
          shape((sets, steps, k.ROWS, k.BATCH), f32))
  fn = jax.jit(lambda *a: k.train_steps(*a, warpgroups=warpgroups))
  text = fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text


def _population(rng, members):
  keys = jax.random.split(jax.random.key(int(rng.integers(1 << 30))), members)
  params = jax.vmap(lambda key: mlp.init_mlp(key, SIZES))(keys)
  return jax.tree.map(lambda a: a + 0.01 * jnp.asarray(rng.standard_normal(a.shape), a.dtype),
                      params)  # Biases off 0, so that their gradients count


def test_pack_round_trips():
  rng = np.random.default_rng(0)
  params = _population(rng, 3)
  w0t, w1, small = k.pack(params, [0.1, 0.2, 0.3])
  assert w0t.shape == (3, 2, k.BLOCKS, k.T, k.INPUTS) and small.shape == (3, k.ROWS, k.T)
  np.testing.assert_array_equal(np.asarray(small[:, k.ROW_LR, 5]), np.float32([0.1, 0.2, 0.3]))
  for a, b in zip(jax.tree.leaves(k.unpack(w0t, w1, small)), jax.tree.leaves(params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("shared", [False, True], ids=["own", "shared"])
def test_twin_follows_train_step_in_float64(shared):
  """Each member, its own learning rate and batches (or the population's one set), is the
  project's float64 training: losses and weights within 1e-10."""
  rng = np.random.default_rng(1)
  members, steps = 3, 3
  n = steps * k.BATCH + 7
  x = rng.integers(0, 256, (n, 784), dtype=np.uint8)
  y = rng.integers(0, 10, n).astype(np.int32)
  orders = np.stack([rng.permutation(n) for _ in range(1 if shared else members)])
  lrs = [0.05, 0.1, 0.2]
  params = _population(rng, members)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    xs, onehot = k.batches(jnp.asarray(x), jnp.asarray(y), jnp.asarray(orders), steps)
    got, losses, _ = k.reference(p64, lrs, xs, onehot)
    for i in range(members):
      order = orders[0 if shared else i]
      p = jax.tree.map(lambda a: a[i], p64)
      tx = train.make_optimizer("sgd", lrs[i])
      state, want = tx.init(p), []
      for s in range(steps):
        idx = order[s * k.BATCH:(s + 1) * k.BATCH]
        p, state, m = train.train_step(p, state, (jnp.asarray(x[idx] / 255.0),
                                                  jnp.asarray(y[idx])), tx=tx, model=models.MLP)
        want.append(float(m["loss"]))
      np.testing.assert_allclose(np.asarray(losses[i]), want, rtol=1e-10)
      for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
        np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-10, atol=1e-13)


def test_batches_for_some_members_are_refused():
  rng = np.random.default_rng(2)
  params = _population(rng, 3)
  xs = jnp.zeros((2, 1, k.BATCH, k.INPUTS), jnp.bfloat16)
  with pytest.raises(ValueError, match="batches for 1 or 3 members, got 2"):
    k.train_steps(params, [0.1] * 3, xs, jnp.zeros((2, 1, k.ROWS, k.BATCH)))
