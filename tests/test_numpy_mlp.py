"""The hand-written NumPy backward and optimizers against JAX autodiff and optax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, ops, train
from jaxshallow.reference import numpy_mlp


def rel_err(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


def random_problem(rng, sizes, batch, dtype):
  params = numpy_mlp.init_mlp(rng, sizes, dtype)
  for layer in params:  # Non-zero biases so their gradients flow through the check.
    layer["b"] = (0.1 * rng.standard_normal(layer["b"].shape)).astype(dtype)
  x = rng.standard_normal((batch, sizes[0])).astype(dtype)
  y = rng.integers(0, sizes[-1], batch)
  return params, x, y


def jax_loss(params, x, y):
  return ops.softmax_cross_entropy(mlp.apply_mlp(params, x), y)[0]


SHAPES = [((784, 256, 10), 64), ((784, 512, 256, 10), 37), ((33, 7, 5), 1), ((20, 10), 9)]


@pytest.mark.parametrize("sizes,batch", SHAPES)
def test_grads_match_jax_float64(sizes, batch):
  params, x, y = random_problem(np.random.default_rng(), sizes, batch, np.float64)
  loss, grads, _ = numpy_mlp.loss_and_grads(params, x, y)
  with jax.enable_x64(True):
    jparams = jax.tree.map(jnp.asarray, params)
    jloss, jgrads = jax.value_and_grad(jax_loss)(jparams, jnp.asarray(x), jnp.asarray(y))
    assert jgrads[0]["w"].dtype == jnp.float64
  assert rel_err(loss, jloss) < 1e-10
  for g, jg in zip(grads, jgrads):
    for k in ("w", "b"):
      assert rel_err(g[k], jg[k]) < 1e-10, (k, rel_err(g[k], jg[k]))


@pytest.mark.parametrize("sizes,batch", SHAPES)
def test_grads_match_jax_float32(sizes, batch):
  # Fixed inputs: two float32 impls may put a pre-activation within rounding of 0 on different
  # sides of a ReLU. Fresh inputs are drawn where float64 is compared.
  params, x, y = random_problem(np.random.default_rng(0), sizes, batch, np.float32)
  loss, grads, _ = numpy_mlp.loss_and_grads(params, x, y)
  assert grads[0]["w"].dtype == np.float32
  jloss, jgrads = jax.value_and_grad(jax_loss)(params, x, y)
  assert rel_err(loss, jloss) < 1e-5
  for g, jg in zip(grads, jgrads):
    for k in ("w", "b"):
      assert rel_err(g[k], jg[k]) < 1e-5, (k, rel_err(g[k], jg[k]))


def test_loss_stable_for_huge_logits():
  logits = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4], [3.0, 1.0, 2.0]])
  y = np.array([0, 1, 2])
  expected = (0.0 + 2e4 + (np.log(np.exp(0) + np.exp(-2) + np.exp(-1)) + 1.0)) / 3
  assert np.isclose(numpy_mlp.softmax_cross_entropy(logits, y), expected, rtol=1e-12)
  with jax.enable_x64(True):
    got, correct = ops.softmax_cross_entropy(jnp.asarray(logits), jnp.asarray(y))
    # Only row 0 is right.
    assert np.isclose(float(got), expected, rtol=1e-12) and int(correct) == 1
    g = jax.grad(lambda z: ops.softmax_cross_entropy(z, jnp.asarray(y))[0])(jnp.asarray(logits))
    assert np.all(np.isfinite(g))
  got32, _ = ops.softmax_cross_entropy(jnp.asarray(logits, jnp.float32), jnp.asarray(y))
  assert np.isfinite(float(got32)) and np.isclose(float(got32), expected, rtol=1e-6)


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
def test_optimizers_match_optax(name):
  rng = np.random.default_rng()
  params, x, y = random_problem(rng, (30, 16, 10), 8, np.float64)
  init, update = numpy_mlp.make_optimizer(name, 0.05, 0.9)
  tx = train.make_optimizer(name, 0.05, 0.9)
  with jax.enable_x64(True):
    jparams = jax.tree.map(jnp.asarray, params)
    state, jstate = init(params), tx.init(jparams)
    for _ in range(5):
      _, grads, _ = numpy_mlp.loss_and_grads(params, x, y)
      params, state = update(grads, state, params)
      jparams, jstate, _ = train.train_step(jparams, jstate, (jnp.asarray(x), jnp.asarray(y)),
                                            tx=tx)
    for p, jp in zip(params, jparams):
      for k in ("w", "b"):
        assert rel_err(p[k], jp[k]) < 1e-10


# The CNN and the regression network --------------------------------------------------------------

from jaxshallow import cnn, models  # noqa: E402
from jaxshallow.reference import numpy_cnn


@pytest.mark.parametrize("batch", [1, 3])
def test_cnn_grads_match_jax_float64(batch):
  rng = np.random.default_rng()
  params = jax.tree.map(lambda a: np.asarray(a, np.float64), cnn.init_cnn(jax.random.key(1)))
  for layer in params:
    layer["b"] = 0.05 * rng.standard_normal(layer["b"].shape)
  x, y = rng.random((batch, 28, 28)), rng.integers(0, 10, batch)
  loss, grads, _ = numpy_cnn.loss_and_grads(params, x, y)
  with jax.enable_x64(True):
    (jloss, _), jgrads = jax.value_and_grad(train.loss_fn, has_aux=True)(
        jax.tree.map(jnp.asarray, params), jnp.asarray(x), jnp.asarray(y),
        ops=ops.get_ops("xla"), model=models.CNN)
    assert jgrads[0]["w"].dtype == jnp.float64
  assert rel_err(loss, jloss) < 1e-10
  for g, jg in zip(grads, jgrads):
    for k in ("w", "b"):
      assert rel_err(g[k], jg[k]) < 1e-10, (k, rel_err(g[k], jg[k]))


def test_cnn_has_50890_parameters():
  params = cnn.init_cnn(jax.random.key(0))
  assert sum(v.size for layer in params for v in layer.values()) == 50890


@pytest.mark.parametrize("sizes", [(32, 256, 1), (32, 256, 1024, 256, 1)])
def test_regression_grads_match_jax_float64(sizes):
  rng = np.random.default_rng()
  params = [{"w": rng.standard_normal((m, n)) / np.sqrt(m)} for m, n in zip(sizes, sizes[1:])]
  x, y = rng.uniform(-1, 1, (20, 32)), rng.standard_normal(20)
  loss, grads, _ = numpy_mlp.loss_and_grads(params, x, y, loss="mse")
  assert all(set(g) == {"w"} for g in grads)  # No biases, no bias gradients.
  with jax.enable_x64(True):
    (jloss, _), jgrads = jax.value_and_grad(train.loss_fn, has_aux=True)(
        jax.tree.map(jnp.asarray, params), jnp.asarray(x), jnp.asarray(y),
        ops=ops.get_ops("xla"), model=models.REGRESSION)
  assert rel_err(loss, jloss) < 1e-10
  for g, jg in zip(grads, jgrads):
    assert rel_err(g["w"], jg["w"]) < 1e-10
