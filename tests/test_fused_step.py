"""The CNN's step of Pallas kernels alone (``fusion="step"``, jaxshallow/fused/step.py) against
the xla scan in float64, and the kernels' hand-offs inside it (interpret mode on the CPU). Its
kernels' own tests: test_conv_batch.py, test_sgd_parts.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import cnn, models, train
from kernel_checks import assert_trajectory_close

@pytest.mark.parametrize("optimizer,side,batch", [("momentum", 12, 6), ("sgd", 13, 4),
                                                   ("adam", 12, 4)])
def test_cnn_step_epoch_float64_matches_xla(optimizer, side, batch):
  """An epoch of step kernels follows the xla scan's trajectory to rounding in float64: params,
  the optimizer's state (momentum's trace; Adam's moments and count), mean loss and accuracy. Mostly blank images, like MNIST's, so that exact-zero
  pre-activations (where ReLU's subgradient could differ) are there to be met. Side 12: the
  head spreads the pool's gradient itself; 13 (an odd pooled map, 9 x 9): the pool's kernel.
  3 and 5 steps: fewer than an iteration of the loop (``fused_step.UNROLL``), and one iteration
  and a step more."""
  seed = int(np.random.default_rng().integers(2**31))
  rng = np.random.default_rng(seed)
  images = np.zeros((20, side, side), np.uint8)
  images[:, 3:9, 3:9] = rng.integers(0, 256, (20, 6, 6))
  labels = rng.integers(0, 10, 20).astype(np.uint8)
  order = rng.permutation(20).astype(np.int32)
  tx = train.make_optimizer(optimizer, 0.05)
  out = {}
  with jax.enable_x64(True):
    params = jax.tree.map(lambda a: a.astype(jnp.float64), cnn.init_cnn(jax.random.key(1), side))
    x = jnp.asarray(images, jnp.float64) / 255
    for impl, fusion in (("xla", "ops"), ("pallas", "step")):
      out[fusion] = train.train_epoch_no_donate(params, tx.init(params), x, labels, order,
                                                tx=tx, batch_size=batch, impl=impl,
                                                model=models.CNN, fusion=fusion)
  (p1, s1, m1), (p2, s2, m2) = out["ops"], out["step"]
  assert jax.tree.structure((p1, s1)) == jax.tree.structure((p2, s2))
  # Adam's m / (sqrt(v) + eps) multiplies a near-zero gradient's rounding by up to lr / eps
  # (5e6 here): 1e-9 of the scale bounds that over these steps; SGD and momentum keep 1e-10.
  assert_trajectory_close(jax.tree.leaves((p2, s2)), jax.tree.leaves((p1, s1)), f"seed {seed}",
                          tol=1e-9 if optimizer == "adam" else 1e-10)
  np.testing.assert_allclose(m1["loss"], m2["loss"], rtol=1e-10, err_msg=f"seed {seed}")
  # The same counts; the scan averages each step's fraction, the step kernels divide the total.
  np.testing.assert_allclose(m1["accuracy"], m2["accuracy"], rtol=1e-12)


def test_fusion_step_refuses_what_it_cannot_train():
  params = cnn.init_cnn(jax.random.key(0), 12)
  images, labels = np.zeros((8, 12, 12), np.uint8), np.zeros(8, np.uint8)
  order = np.arange(8, dtype=np.int32)
  for tx, model, match in (
      (__import__("optax").sgd(0.1), models.CNN, "make tx with jaxshallow.make_optimizer"),
      (train.make_optimizer("sgd", 0.1), models.MLP, "not the mlp")):
    p = params if model is models.CNN else __import__("jaxshallow").init_mlp(
        jax.random.key(0), (144, 8, 10))
    with pytest.raises(ValueError, match=match):
      train.train_epoch(p, tx.init(p), images, labels, order, tx=tx, batch_size=8,
                        impl="pallas", model=model, fusion="step")


@pytest.mark.parametrize("n,side,c,split", [(5, 6, 3, None), (37, 8, 32, 128)])
def test_head_spreads_the_pools_gradient_float64(n, side, c, split):
  """The output layer's input gradient spread to the pool's input by the head kernel itself,
  against the head's dh spread by the pool's backward kernel: one and several row blocks, the
  one-launch and the split form, a pool that chose nothing (-1) in places."""
  from pallas_kernels.ops import dense_xent, max_pool
  rng = np.random.default_rng()
  k = (side // 2) ** 2 * c
  with jax.enable_x64(True):
    h, w = jnp.asarray(rng.random((n, k))), jnp.asarray(rng.normal(size=(k, 10)))
    b, labels = jnp.asarray(rng.normal(size=10)), jnp.asarray(rng.integers(0, 10, n))
    arg = jnp.asarray(rng.integers(-1, 4, (n * k // c, c)), jnp.int32)
    shape = (n, side, side, c)
    sizes = dict(block_m=16, block_k=64, split=split)
    plain = dense_xent.head_call(h, w, b, labels, with_grads=True, parts=True,
                                 interpret=True, **sizes)
    spread = dense_xent.head_call(h, w, b, labels, with_grads=True, parts=True,
                                  interpret=True, pool=(arg, shape), **sizes)
    want = max_pool.pool_bwd(plain[2].reshape(n, side // 2, side // 2, c), arg, shape,
                             interpret=True)
  np.testing.assert_array_equal(spread[2].reshape(shape), want)
  for a, r in zip(spread[3:], plain[3:]):
    np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("n,side,cin,cout,classes,block_q", [(3, 9, 5, 7, 10, 4),
                                                              (2, 14, 16, 32, 3, 16)])
def test_conv_pool_writes_the_heads_partial_logits_float64(n, side, cin, cout, classes, block_q):
  """The fused convolution's partial logits of the next dense layer add up to the pooled map's
  float64 product with its weights (pooled counts that are and are not multiples of the block,
  odd channels and classes), and the head's gradient kernel takes them in place of its own."""
  from pallas_kernels.ops import conv_pool, dense_xent
  rng = np.random.default_rng()
  with jax.enable_x64(True):
    x = jnp.asarray(rng.normal(size=(n, side, side, cin)))
    w, b = jnp.asarray(rng.normal(size=(3, 3, cin, cout))), jnp.asarray(rng.normal(size=cout))
    k = ((side - 2) // 2) ** 2 * cout
    hw, hb = jnp.asarray(rng.normal(size=(k, classes))), jnp.asarray(rng.normal(size=classes))
    labels = jnp.asarray(rng.integers(0, classes, n))
    y, arg, parts = conv_pool.conv_relu_pool_fwd(x, w, b, head_w=hw, block_q=block_q,
                                                 interpret=True)
    y0, arg0 = conv_pool.conv_relu_pool_fwd(x, w, b, block_q=block_q, interpret=True)
    h = y.reshape(n, -1)
    sums = np.asarray(parts).reshape(-1, n, parts.shape[1]).sum(0)
    sizes = dict(block_m=16, block_k=32, split=64)
    own = dense_xent.head_call(h, hw, hb, labels, with_grads=True, parts=True,
                               interpret=True, **sizes)
    given = dense_xent.head_call(h, hw, hb, labels, with_grads=True, parts=True,
                                 interpret=True, logits_parts=parts, **sizes)
  np.testing.assert_array_equal(y, y0)
  np.testing.assert_array_equal(arg, arg0)
  np.testing.assert_allclose(sums[:, :classes], np.asarray(h) @ np.asarray(hw), rtol=1e-12,
                             atol=1e-12)
  assert not sums[:, classes:].any()
  for a, r in zip(given, own):
    np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)
  with pytest.raises(ValueError, match="split form"):
    dense_xent.head_call(h, hw, hb, labels, with_grads=True, interpret=True, block_m=16,
                         block_k=32, logits_parts=parts)
