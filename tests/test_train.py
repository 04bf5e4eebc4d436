"""The functional training API: purity, jit, the compiled epoch, partial batches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshallow
from jaxshallow import train
from jaxshallow.reference import numpy_mlp


def synthetic(n, rng):
  images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
  labels = rng.integers(0, 10, n).astype(np.uint8)
  return images, labels


def test_public_api_imports():
  from jaxshallow import train_step  # noqa: F401  The import the README promises.
  assert callable(jaxshallow.train_step) and callable(jaxshallow.init_mlp)


def test_init_mlp_any_depth():
  params = jaxshallow.init_mlp(jax.random.key(0), (784, 512, 256, 10))
  assert [p["w"].shape for p in params] == [(784, 512), (512, 256), (256, 10)]
  assert all(float(jnp.abs(p["b"]).max()) == 0 for p in params)
  # He init: std sqrt(2 / fan_in).
  assert abs(float(params[0]["w"].std()) / np.sqrt(2 / 784) - 1) < 0.02
  logits = jaxshallow.apply_mlp(params, jnp.zeros((3, 28, 28)))
  assert logits.shape == (3, 10)


def test_pixels_are_the_same_float32_values_wherever_they_are_scaled():
  """Every uint8 value scales to the same bits eagerly, jitted, in the numpy reference and in the
  kernels' own scaling. (A division by 255 did not: XLA's CPU backend took it as a product by
  1/255 when jitted only, jax 0.12.1, and a float64 check of a kernel failed on it.)"""
  from pallas_kernels.fused import population_step
  from pallas_kernels.ops import conv
  x = np.arange(256, dtype=np.uint8)
  want = np.arange(256, dtype=np.float32) * np.float32(1 / 255)
  for name, f in [("eager", train.to_float), ("jit", jax.jit(train.to_float)),
                  ("numpy", numpy_mlp.to_float), ("conv", jax.jit(conv.pixels)),
                  ("population_step", jax.jit(population_step.pixels))]:
    got = np.asarray(f(x if name == "numpy" else jnp.asarray(x)))
    assert got.dtype == np.float32, name
    np.testing.assert_array_equal(got, want, err_msg=name)


def test_train_step_is_pure_and_jits():
  rng = np.random.default_rng(0)
  images, labels = synthetic(32, rng)
  tx = train.make_optimizer("sgd", 0.1)
  params = jaxshallow.init_mlp(jax.random.key(1), (784, 64, 10))
  batch = (train.to_float(images), jnp.asarray(labels))
  step = jax.jit(train.train_step, static_argnames=("tx", "impl", "precision", "model"))
  p1, _, m1 = step(params, tx.init(params), batch, tx=tx)
  p2, _, m2 = train.train_step(params, tx.init(params), batch, tx=tx)
  assert float(m1["loss"]) == float(m2["loss"])
  np.testing.assert_allclose(p1[0]["w"], p2[0]["w"], rtol=1e-6, atol=1e-7)
  assert not np.allclose(p1[0]["w"], params[0]["w"])  # The inputs are not mutated; params moved.


def test_epoch_matches_numpy_and_drops_partial_batch():
  # Fixed inputs: two float32 impls may put a pre-activation within rounding of 0 on different
  # sides of a ReLU. Fresh inputs are drawn where float64 is compared.
  rng = np.random.default_rng(0)
  n, bs = 200, 64  # Three full batches; the last 8 examples are skipped.
  images, labels = synthetic(n, rng)
  tx = train.make_optimizer("sgd", 0.1)
  params = jaxshallow.init_mlp(jax.random.key(2), (784, 32, 10))
  np_params = numpy_mlp.cast(params, np.float32)
  order = train.epoch_order(0, 0, n)
  jp, _, metrics = train.train_epoch(params, tx.init(params), jnp.asarray(images),
                                     jnp.asarray(labels), jnp.asarray(order), tx=tx,
                                     batch_size=bs)
  init, update = numpy_mlp.make_optimizer("sgd", np.float32(0.1))
  npp, _, np_loss = numpy_mlp.train_epoch(np_params, init(np_params), images, labels, order,
                                          update=update, batch_size=bs)
  assert abs(float(metrics["loss"]) / np_loss - 1) < 1e-5
  for a, b in zip(jp, npp):
    np.testing.assert_allclose(a["w"], b["w"], rtol=1e-4, atol=1e-6)
  # Dropping the partial batch: the same epoch over only the first 192 indices is identical.
  jp2, _, _ = train.train_epoch(jaxshallow.init_mlp(jax.random.key(2), (784, 32, 10)),
                                tx.init(params), jnp.asarray(images), jnp.asarray(labels),
                                jnp.asarray(order[:192]), tx=tx, batch_size=bs)
  np.testing.assert_array_equal(jp[0]["w"], jp2[0]["w"])


def test_epoch_order_reproducible():
  a, b = train.epoch_order(3, 1, 100), train.epoch_order(3, 1, 100)
  np.testing.assert_array_equal(a, b)
  assert sorted(a.tolist()) == list(range(100))
  assert not np.array_equal(a, train.epoch_order(3, 2, 100))


def test_evaluate_matches_numpy():
  rng = np.random.default_rng()
  images, labels = synthetic(500, rng)
  params = jaxshallow.init_mlp(jax.random.key(3), (784, 32, 10))
  got = train.evaluate(params, jnp.asarray(images), jnp.asarray(labels), batch_size=128)
  ref = numpy_mlp.evaluate(numpy_mlp.cast(params, np.float64), images, labels, np.float64)
  assert abs(got["loss"] / ref["loss"] - 1) < 1e-5
  assert abs(got["accuracy"] - ref["accuracy"]) <= 1 / 500


def test_pallas_epoch_matches_xla():
  """The whole training epoch through the Pallas kernels (interpreted here) against XLA, in
  float32 on fixed inputs: on a fresh draw two float32 impls put a pre-activation within
  rounding of 0 on different sides about one run in 400, moving a column of W1 by 3e-4 (the
  float64 trajectory test checks the same function)."""
  rng = np.random.default_rng(0)
  images, labels = synthetic(300, rng)
  tx = train.make_optimizer("sgd", 0.1)
  order = jnp.asarray(train.epoch_order(1, 0, 300))
  results = {}
  for impl in ("xla", "pallas"):
    params = jaxshallow.init_mlp(jax.random.key(4), (784, 48, 10))
    results[impl] = train.train_epoch(params, tx.init(params), jnp.asarray(images),
                                      jnp.asarray(labels), order, tx=tx, batch_size=37,
                                      impl=impl)
  (px, _, mx), (pp, _, mp) = results["xla"], results["pallas"]
  assert abs(float(mp["loss"]) / float(mx["loss"]) - 1) < 1e-5
  assert float(mp["accuracy"]) == float(mx["accuracy"])
  for a, b in zip(px, pp):
    np.testing.assert_allclose(a["w"], b["w"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(a["b"], b["b"], rtol=1e-4, atol=1e-6)


def test_pallas_float64_trajectory_matches_xla():
  """In float64 the kernels follow XLA's training trajectory to rounding: proof that they
  compute the same function, whatever float32 rounding does to long runs at a high lr."""
  # Fixed inputs: two float32 impls may put a pre-activation within rounding of 0 on different
  # sides of a ReLU. Fresh inputs are drawn where float64 is compared.
  rng = np.random.default_rng(0)
  images, labels = synthetic(640, rng)
  tx = train.make_optimizer("sgd", 0.5)
  step = jax.jit(train.train_step, static_argnames=("tx", "impl"))
  losses = {}
  with jax.enable_x64(True):
    x_all = jnp.asarray(images, jnp.float64) / 255
    for impl in ("xla", "pallas"):
      p = jax.tree.map(lambda a: a.astype(jnp.float64),
                       jaxshallow.init_mlp(jax.random.key(5), (784, 64, 10)))
      s, losses[impl] = tx.init(p), []
      for b in range(10):
        idx = slice(64 * b, 64 * (b + 1))
        p, s, m = step(p, s, (x_all[idx], jnp.asarray(labels[idx])), tx=tx, impl=impl)
        losses[impl].append(float(m["loss"]))
  np.testing.assert_allclose(losses["pallas"], losses["xla"], rtol=1e-12)


def test_cnn_float64_trajectory_matches_xla_on_blank_patches():
  """The same for the CNN, with momentum, on images that are mostly blank like MNIST's: exact-zero
  pre-activations are where the impls could take different ReLU subgradients."""
  from jaxshallow import cnn, models
  rng = np.random.default_rng()
  images = np.zeros((48, 12, 12), np.uint8)
  images[:, 3:9, 3:9] = rng.integers(0, 256, (48, 6, 6))
  labels = rng.integers(0, 10, 48).astype(np.uint8)
  tx = train.make_optimizer("momentum", 0.05)
  step = jax.jit(train.train_step, static_argnames=("tx", "impl", "model"))
  losses = {}
  with jax.enable_x64(True):
    x_all = jnp.asarray(images, jnp.float64) / 255
    for impl in ("xla", "pallas"):
      p = jax.tree.map(lambda a: a.astype(jnp.float64), cnn.init_cnn(jax.random.key(2), 12))
      s, losses[impl] = tx.init(p), []
      for b in range(3):
        idx = slice(16 * b, 16 * (b + 1))
        p, s, m = step(p, s, (x_all[idx], jnp.asarray(labels[idx])), tx=tx, impl=impl,
                       model=models.CNN)
        losses[impl].append(float(m["loss"]))
  np.testing.assert_allclose(losses["pallas"], losses["xla"], rtol=1e-10)


BAD_BATCHES = [  # (images, labels, words the ValueError must contain)
    (np.zeros((8, 27, 28), np.float32), np.zeros(8, np.int32),
     ["batch[0]", "(8, 27, 28)", "(784, 16)"]),
    (np.zeros((8, 28, 28), np.float32), np.zeros(7, np.int32), ["batch[1]", "(8,)", "(7,)"]),
    (np.zeros((8, 28, 28), np.float32), np.zeros(8, np.float32),
     ["batch[1]", "integer", "float32"]),
    (np.zeros(8, np.float32), np.zeros(8, np.int32), ["batch[0]", "(8,)"]),
]


@pytest.mark.parametrize("images,labels,words", BAD_BATCHES)
@pytest.mark.parametrize("jit", [False, True])
def test_train_step_names_a_bad_argument(images, labels, words, jit):
  tx = train.make_optimizer("sgd", 0.1)
  params = jaxshallow.init_mlp(jax.random.key(0), (784, 16, 10))
  step = jax.jit(train.train_step, static_argnames="tx") if jit else train.train_step
  with pytest.raises(ValueError) as e:
    step(params, tx.init(params), (images, labels), tx=tx)
  assert all(w in str(e.value).splitlines()[0] for w in words), str(e.value)


def test_train_step_names_a_bad_cnn_image():
  from jaxshallow import cnn, models
  tx = train.make_optimizer("sgd", 0.1)
  params = cnn.init_cnn(jax.random.key(0))
  with pytest.raises(ValueError, match=r"batch\[0\] of shape \(4, 30, 30\)"):
    train.train_step(params, tx.init(params), (np.zeros((4, 30, 30)), np.zeros(4, np.int32)),
                     tx=tx, model=models.CNN)


@pytest.mark.parametrize("n_labels,order,batch_size,match", [
    (100, np.arange(100, dtype=np.int32), 200, "batch_size must be between 1 and len"),
    (100, np.arange(100.0), 10, "order must be a 1-D array of integer"),
    (50, np.arange(100, dtype=np.int32), 10, r"labels must hold one value .* got \(50,\)")])
def test_train_epoch_names_a_bad_argument(n_labels, order, batch_size, match):
  tx = train.make_optimizer("sgd", 0.1)
  params = jaxshallow.init_mlp(jax.random.key(0), (784, 16, 10))
  images, labels = synthetic(100, np.random.default_rng(0))
  with pytest.raises(ValueError, match=match):
    train.train_epoch(params, tx.init(params), images, labels[:n_labels], order, tx=tx,
                      batch_size=batch_size)


def test_kernels_stand_on_their_own():
  """pallas_kernels never imports the library that uses it (no import cycle), and every module
  of the library keeps to one job (under 300 lines)."""
  import ast
  import pathlib
  root = pathlib.Path(__file__).resolve().parents[1]
  for path in (root / "pallas_kernels").glob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
               [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      assert not any(n.split(".")[0] == "jaxshallow" for n in names), path.name
  for path in (root / "jaxshallow").glob("*.py"):
    assert len(path.read_text().splitlines()) <= 300, path.name


def test_labels_outside_the_classes_are_one_clear_error():
  """A label of 12 for 10 outputs would train to NaN without a word: refused in one line by an
  eager train_step, by check_labels (once per data set, on the host) and by the trainers."""
  from jaxshallow.data import Dataset
  from jaxshallow.run import config, trainers
  params = jaxshallow.init_mlp(jax.random.key(0), (20, 8, 10))
  tx = jaxshallow.make_optimizer("sgd", 0.1)
  x = np.random.default_rng(0).random((4, 20), np.float32)
  y = np.array([1, 2, 12, 3], np.int32)
  with pytest.raises(ValueError, match=r"batch\[1\]: class 12 is outside the network's 10"):
    jaxshallow.train_step(params, tx.init(params), (x, y), tx=tx)
  with pytest.raises(ValueError, match="class -1 is outside"):
    jaxshallow.check_labels(np.array([0, -1]), 10)
  jaxshallow.check_labels(np.arange(10), 10)
  ds = Dataset(np.zeros((8, 4, 5), np.uint8), np.full(8, 11, np.uint8),
               np.zeros((2, 4, 5), np.uint8), np.zeros(2, np.uint8))
  cfg = config.resolve(config.Config(model="mlp", hidden=(8,)))
  with pytest.raises(ValueError, match="the training labels: class 11"):
    trainers.make_trainer(cfg, ds)
