"""The population step kernels (pallas_kernels.fused.population_step) against their plain-jnp twin in
float64, and how a population picks them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, population as pop
from pallas_kernels.fused import population_step as ps


def _draw(rng, b, k, n, c, uint8):
  f = jnp.float64
  normal = lambda *shape: jnp.asarray(rng.normal(size=shape) * 0.3, f)
  if uint8:
    images = [jnp.asarray(rng.integers(0, 256, (b, k)), jnp.uint8) for _ in range(2)]
  else:
    images = [normal(b, k) for _ in range(2)]
  return (normal(k, n), normal(n), normal(n, c), normal(c), *images,
          jnp.asarray(rng.integers(0, c, b), jnp.int32))


# Sizes that are not multiples of the blocks (16 rows of K, 32 columns of N, 16 of the head's K).
@pytest.mark.parametrize("b,k,n,c,uint8", [(5, 50, 37, 3, True), (17, 33, 70, 10, False),
                                           (1, 20, 16, 2, True), (64, 100, 33, 10, True)])
def test_one_step_matches_reference_float64(b, k, n, c, uint8):
  with jax.enable_x64(True):
    seed = int(np.random.default_rng().integers(2**31))  # fresh inputs, said on a failure
    w0, b0, w1, b1, x, x_next, y = _draw(np.random.default_rng(seed), b, k, n, c, uint8)
    lr = 0.37
    want = ps.reference(w0, b0, w1, b1, x, y, lr, x_next)
    fwd = dict(block_k=16, block_n=32, interpret=True)
    w0_same, h = ps.update_forward(w0, None, None, x, b0, **fwd)
    gs, nb0, nw1, nb1, rows, correct = ps.head_update(h, y, b0, w1, b1, lr, block_k=16,
                                                      interpret=True)
    nw0, h_next = ps.update_forward(w0, x, gs, x_next, nb0, **fwd)
    assert np.array_equal(w0_same, w0)
    # uint8 pixels are the same float32 values on both sides (a product by 1/255; a division
    # had differed once, XLA's CPU backend taking it as that product when jitted only).
    for got, ref in zip((nw0, nb0, nw1, nb1, h_next, rows), want[:6]):
      assert got.dtype == jnp.float64
      np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12,
                                 err_msg=f"inputs of seed {seed}")
    assert np.array_equal(correct, want[6])


def test_step_kernels_train_image_shaped_uint8_data_as_xla_does():
  """(n, H, W) uint8 images, as MNIST loads: the step kernels flatten and scale them as the
  model does (the xla population is the reference: the op kernels keep uint8 pixels float32)."""
  rng = np.random.default_rng()
  images = jnp.asarray(rng.integers(0, 256, (40, 4, 5)), jnp.uint8)
  labels = jnp.asarray(rng.integers(0, 3, 40), jnp.int32)
  with jax.enable_x64(True):
    init = lambda key: mlp.init_mlp(key, (20, 9, 3), dtype=jnp.float64)
    params = pop.init_params(init, [0, 1])
    state = pop.init_opt_state("sgd", params)
    orders = pop.epoch_orders([0, 1], 0, 40)
    kw = dict(optimizer="sgd", momentum=0.9, batch_size=8)
    want = pop._epoch(params, state, images, labels, orders, jnp.asarray([0.1, 0.3]),
                      impl="xla", **kw)
    got = pop._epoch(params, state, images, labels, orders, jnp.asarray([0.1, 0.3]),
                     impl="pallas", fusion="step", **kw)
    for a, b in zip(jax.tree.leaves(got[0]) + [got[2]["loss"]],
                    jax.tree.leaves(want[0]) + [want[2]["loss"]]):
      np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_step_fusion_refuses_what_it_cannot_train():
  with jax.enable_x64(True):
    init = lambda key: [{"w": jnp.zeros((4, 3))}, {"w": jnp.zeros((3, 2))}]
    params = pop.init_params(init, [0, 1])
    state = pop.init_opt_state("sgd", params)
    x, y = jnp.zeros((8, 4)), jnp.zeros((8,), jnp.int32)
    orders = pop.epoch_orders([0, 1], 0, 8)
    with pytest.raises(ValueError, match="it takes layers with biases"):
      pop.train_epoch(params, state, x, y, orders, jnp.ones(2), optimizer="sgd", momentum=0.9,
                      batch_size=4, impl="pallas", fusion="step")
