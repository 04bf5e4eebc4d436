"""cluster_mlp_mgpu on the CPU: its kernel lowers for a Hopper GPU (Mosaic GPU's checks of layouts,
shared memory and the cluster run at lowering), its jnp twin follows the float64 training of
the project, its packing of the parameters and batches loses nothing, and networks it cannot
take are refused in one line. Its numbers on the GPU are checked by
``experiments.check_kernels --only=cluster_mlp`` on the device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, train
from pallas_kernels.fused import cluster_mlp_mgpu
from pallas_kernels.mgpu import grid_barrier
from pallas_kernels.ops import dense_mgpu


def _layer(n, m):  # An abstract dense layer, for tracing and lowering
  return {"w": jax.ShapeDtypeStruct((n, m), jnp.float32),
          "b": jax.ShapeDtypeStruct((m,), jnp.float32)}


def _abstract(hidden, steps):
  """train_steps' abstract arguments: 784-``hidden``-10, ``steps`` batches of 64 and labels."""
  return ([_layer(784, hidden), _layer(hidden, 10)],
          jax.ShapeDtypeStruct((steps, 64, 832), jnp.bfloat16),
          jax.ShapeDtypeStruct((steps, 10, 64), jnp.bfloat16))


def _setup(rng, steps, hidden=256, batch=64):
  n = steps * batch + 5
  x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
  y = rng.integers(0, 10, n).astype(np.int32)
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), (784, hidden, 10))
  params = jax.tree.map(lambda a: a + 0.01 * jnp.asarray(rng.standard_normal(a.shape), a.dtype),
                        params)  # biases off zero, so their gradients are tested too
  return params, x, y, rng.permutation(n).astype(np.int32)


def _train_step_float64(p64, x, y, order, steps, batch, lr):
  """The project's training step in float64 (train_step, SGD) over ``steps`` batches of
  ``batch`` rows in ``order``: the final params, each step's loss and accuracy."""
  tx = train.make_optimizer("sgd", lr)
  p, state, losses, accuracy = p64, tx.init(p64), [], []
  for s in range(steps):
    idx = order[s * batch:(s + 1) * batch]
    pixels = jnp.asarray(x[idx], jnp.float64) / 255.0  # as train.to_float, in float64
    p, state, m = train.train_step(p, state, (pixels, jnp.asarray(y[idx])), tx=tx,
                                   model=models.MLP)
    losses.append(float(m["loss"]))
    accuracy.append(float(m["accuracy"]))
  return p, losses, accuracy


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
@pytest.mark.parametrize("steps,precision", [(1, "float32"), (4, "float32"), (3, "bfloat16")])
def test_kernel_lowers(steps, precision):
  """One step, a few, and one part of W0 in the products."""
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, precision))
  text = fn.trace(*_abstract(256, steps)).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
def test_kernel_without_exchanges_lowers_apart():
  """The probe's floor (``probes.cluster_floor``): ``exchanges`` off lowers, to another kernel;
  only one network of 256 units, one pass a step, takes it."""
  texts = [jax.jit(lambda p, x, o, on=on: cluster_mlp_mgpu.train_steps(p, x, o, 0.5,
                                                                        exchanges=on))
           .trace(*_abstract(256, 2)).lower(lowering_platforms=("cuda",)).as_text()
           for on in (True, False)]
  assert all("mosaic_gpu" in t for t in texts) and texts[0] != texts[1]
  with pytest.raises(ValueError, match="exchanges off"):
    cluster_mlp_mgpu.train_steps(*_abstract(512, 2), 0.5, exchanges=False)


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
@pytest.mark.parametrize("hidden,steps", [(512, 3), (1024, 2), (300, 2)])
def test_kernel_of_several_clusters_lowers(hidden, steps):
  """A network of hidden / 256 clusters (300: two, padded), one launch: its groups' class sums
  meet at a grid barrier (Pallas' global semaphore: one counter for the grid, released and
  acquired at GPU scope)."""
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5))
  text = fn.trace(*_abstract(hidden, steps)).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text and "red.release.gpu.global.add" in text
  assert "tensor<1xi32>" in text  # The grid's one counter
  assert "fence.proxy.async.global" in text  # Before the copy reads the other groups' sums


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
@pytest.mark.parametrize("hidden", [2048, 1800])
def test_more_groups_than_clusters_lower_without_clusters(hidden):
  """784-2048-10 (and 1800, padded): 8 groups, more than an H100 holds clusters of 16, run as
  128 CTAs without clusters, their partial logits, class sums and logits through global memory
  at three grid barriers a step."""
  assert cluster_mlp_mgpu._flat(cluster_mlp_mgpu._groups(hidden))
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5))
  text = fn.trace(*_abstract(hidden, 2)).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text and "red.release.gpu.global.add" in text
  assert "fence.proxy.async.global" in text


def test_flat_networks_take_batch_64_with_the_jax_checked_only(monkeypatch):
  net = dict(wide=True, bias=True, optimizer="sgd", dtype=jnp.float32)
  monkeypatch.setattr(cluster_mlp_mgpu, "_jax_version", lambda: (0, 11))  # (every batch)
  why = cluster_mlp_mgpu.problem((784, 2048, 10), 128, **net)
  assert why == "it takes batch 64 at more than 1792 hidden units, not 128"
  monkeypatch.setattr(cluster_mlp_mgpu, "_jax_version", lambda: (0, 10))
  monkeypatch.setattr(jax, "__version__", "0.10.2")
  why = cluster_mlp_mgpu.problem((784, 2048, 10), 64, **net)
  assert why == ("it takes more than 1792 hidden units with jax 0.11 or 0.12 (checked on a GPU),"
                 " not 0.10.2")
  assert cluster_mlp_mgpu.problem((784, 1792, 10), 64, **net) is None
  monkeypatch.setattr(cluster_mlp_mgpu, "_jax_version", lambda: (0, 11))
  assert cluster_mlp_mgpu.problem((784, 2048, 10), 64, **net) is None


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
def test_a_padded_hidden_layer_lowers_and_keeps_its_width():
  """784-100-10: padded to one cluster of 256 units for the launch, its 100 units out."""
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5))
  args = _abstract(100, 2)
  params, losses, correct = jax.eval_shape(fn, *args)
  assert [(l["w"].shape, l["b"].shape) for l in params] == [((784, 100), (100,)),
                                                             ((100, 10), (10,))]
  assert losses.shape == correct.shape == (2,)
  text = fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text and "red.release.gpu.global.add" not in text  # One cluster


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
@pytest.mark.parametrize("hidden,passes,precision", [(256, 2, "float32"), (256, 4, "tf32"),
                                                     (512, 2, "bfloat16")])
def test_kernel_of_several_passes_lowers(hidden, passes, precision):
  """A batch of 64 ``passes`` rows: 4 batches of 64 as 4 / ``passes`` steps (the gradients added
  up over the passes, W0 updated in the last), one cluster and two."""
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, precision,
                                                            passes=passes))
  args = _abstract(hidden, 4)
  _, losses, correct = jax.eval_shape(fn, *args)
  assert losses.shape == correct.shape == (4 // passes,)
  text = fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text


def test_batches_that_are_not_whole_steps_are_refused():
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, passes=2))
  with pytest.raises(ValueError, match="3 batches of 64 rows are not steps of 2"):
    fn.trace(*_abstract(256, 3))


def test_too_many_clusters_or_the_interpreter_are_refused():
  """More CTAs than an H100 holds at once would never meet (a hang): refused (8 groups of 16
  run without clusters, 9 do not fit); so is the interpreter, which cannot run the grid
  barrier."""
  for hidden, kw, message in [(2304, {}, "144 CTAs are more than the 132"),
                              (2048, {"interpret": True}, "without clusters: .* compiled"),
                              (512, {"interpret": True}, "trains alone, compiled")]:
    fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, **kw))
    with pytest.raises(ValueError, match=message):
      fn.trace(*_abstract(hidden, 1))


@pytest.mark.parametrize("hidden", [256, 512])
def test_twin_follows_train_step_in_float64(hidden):
  """The twin's arithmetic (1/255 after the product, logits summed over 16-unit groups in
  order, then over the clusters' sums in order) is the project's training step: float64
  trajectories within 1e-10."""
  rng = np.random.default_rng(0)
  steps, lr = 4, 0.5
  params, x, y, order = _setup(rng, steps, hidden)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    xs, onehot = cluster_mlp_mgpu.batches(jnp.asarray(x), jnp.asarray(y), order, steps)
    got, losses, correct = cluster_mlp_mgpu.reference(p64, xs.astype(jnp.float64),
                                                 onehot.astype(jnp.float64), lr)
    p, want, want_acc = _train_step_float64(p64, x, y, order, steps, 64, lr)
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(correct), np.round(np.array(want_acc) * 64))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-13)


@pytest.mark.skipif(cluster_mlp_mgpu.lowers() is not None, reason=str(cluster_mlp_mgpu.lowers()))
def test_passes_split_between_clusters_lower():
  """A step's passes split between four clusters of the same units (``rowgroups``): their sums
  meet through global memory at a grid barrier a warpgroup (two counters), in two rounds (two
  clusters take one: the same code)."""
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, passes=4,
                                                            rowgroups=4))
  args = _abstract(256, 8)
  _, losses, _ = jax.eval_shape(fn, *args)
  assert losses.shape == (2,)
  text = fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
  assert "red.release.gpu.global.add" in text and "tensor<2xi32>" in text


@pytest.mark.parametrize("kw,message", [({"passes": 3}, "a multiple of the clusters"),
                                         ({"passes": 6, "rowgroups": 3}, "two or four"),
                                         ({"passes": 2, "interpret": True}, "compiled")])
def test_rowgroups_it_cannot_run_are_refused(kw, message):
  kw = {"rowgroups": 2, **kw}
  fn = jax.jit(lambda p, x, o: cluster_mlp_mgpu.train_steps(p, x, o, 0.5, **kw))
  with pytest.raises(ValueError, match=message):
    fn.trace(*_abstract(256, 6))


@pytest.mark.parametrize("hidden,batch,rowgroups", [(256, 128, 1), (256, 256, 1), (512, 128, 1),
                                                    (256, 256, 2), (256, 512, 2),
                                                    (256, 256, 4), (256, 512, 4)])
def test_twin_of_several_passes_follows_train_step_in_float64(hidden, batch, rowgroups):
  """A step of 64 P rows as P passes of 64 (each pass's gradient summed in pass order, the
  update after the last; with row groups, each group's summed, then the groups' sums in pairs,
  then pairs of pairs) is train_step at batch 64 P: float64 trajectories within 1e-10."""
  rng = np.random.default_rng(6)
  steps, lr, passes = 3, 0.5, batch // 64
  params, x, y, order = _setup(rng, steps, hidden, batch)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    xs, onehot = cluster_mlp_mgpu.batches(jnp.asarray(x), jnp.asarray(y), order, steps * passes)
    got, losses, correct = cluster_mlp_mgpu.reference(p64, xs.astype(jnp.float64),
                                                      onehot.astype(jnp.float64), lr, passes,
                                                      rowgroups)
    p, want, want_acc = _train_step_float64(p64, x, y, order, steps, batch, lr)
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(correct), np.round(np.array(want_acc) * batch))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-13)


def test_a_step_of_several_passes_reports_the_whole_batch():
  """The kernel writes each pass's 64 per-row losses and flags; a step's loss and count are
  over all its rows (``_launch``): checked with a stand-in kernel that writes the row's index
  as its loss and flags even rows."""
  passes, steps = 2, 3

  def call(w0p, small, eye, xs, onehot):
    rows = jnp.arange(steps * passes * 64, dtype=jnp.float32).reshape(1, steps * passes, 1, 64)
    metrics = jnp.concatenate([rows, (rows % 2 == 0).astype(jnp.float32)], axis=2)
    return w0p, small, metrics
  params, *_ = _setup(np.random.default_rng(7), 1)
  _, losses, correct = cluster_mlp_mgpu._launch(
      call, jax.tree.map(lambda a: a[None], params), jnp.zeros(1), None, None, passes)
  want = [np.mean(np.arange(s * 128, (s + 1) * 128)) for s in range(steps)]
  np.testing.assert_allclose(np.asarray(losses[0]), want, rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(correct[0]), [64] * steps)


@pytest.mark.parametrize("hidden", [100, 300])
def test_padded_units_train_as_none(hidden):
  """A hidden layer of another width than 256 G trains padded with zero units (pad_hidden): the
  twin on the padded network follows train_step on the unpadded one in float64 (1e-10), and
  the padded units' weights stay exactly zero."""
  rng = np.random.default_rng(5)
  steps, lr, units = 3, 0.5, 256 * -(-hidden // 256)
  params, x, y, order = _setup(rng, steps, hidden)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    xs, onehot = cluster_mlp_mgpu.batches(jnp.asarray(x), jnp.asarray(y), order, steps)
    padded = cluster_mlp_mgpu.pad_hidden(p64, units)
    got, losses, _ = cluster_mlp_mgpu.reference(padded, xs.astype(jnp.float64),
                                                onehot.astype(jnp.float64), lr)
    for leaf in (got[0]["w"][:, hidden:], got[0]["b"][hidden:], got[1]["w"][hidden:]):
      assert not np.any(np.asarray(leaf))
    got = cluster_mlp_mgpu.unpad_hidden(got, hidden)
    p, want, _ = _train_step_float64(p64, x, y, order, steps, 64, lr)
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-10)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(p)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-13)


def test_twin_in_float32_is_near_float64():
  """In float32 the twin stays within float32's tolerance of the float64 run (the kernel is
  held to the same on the GPU)."""
  rng = np.random.default_rng(1)
  steps = 5
  params, x, y, order = _setup(rng, steps)
  xs, onehot = cluster_mlp_mgpu.batches(jnp.asarray(x), jnp.asarray(y), order, steps)
  got, losses, _ = cluster_mlp_mgpu.reference(params, xs, onehot, 0.5)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    want, want_losses, _ = cluster_mlp_mgpu.reference(p64, xs.astype(jnp.float64),
                                                 onehot.astype(jnp.float64), 0.5)
  np.testing.assert_allclose(np.asarray(losses), np.asarray(want_losses), rtol=1e-5)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    a, b = np.asarray(a), np.asarray(b)
    assert np.linalg.norm(a - b) <= 1e-5 * np.linalg.norm(b)


def test_split3_is_exact():
  """Three bfloat16 parts add up to the float32 value, bit for bit (wide exponents too)."""
  rng = np.random.default_rng(2)
  a = (rng.standard_normal(10000) * np.exp(rng.uniform(-30, 30, 10000))).astype(np.float32)
  hi, mid, lo = jax.jit(dense_mgpu.split3)(jnp.asarray(a))
  f32 = jnp.float32
  np.testing.assert_array_equal(np.asarray((hi.astype(f32) + mid.astype(f32)) + lo.astype(f32)), a)
  # The first part is bfloat16's own rounding (to nearest even).
  np.testing.assert_array_equal(np.asarray(hi).view(np.uint16),
                                np.asarray(jnp.asarray(a).astype(jnp.bfloat16)).view(np.uint16))


def test_split3_has_no_bfloat16_round_trip():
  """XLA on GPUs drops float32 -> bfloat16 -> float32 (it allows excess precision), which left
  the later parts zero there (on the H100, float32 trained like bfloat16); the CPU keeps the
  round trip, so only the program's form shows it: no bfloat16 is converted back."""
  jaxpr = jax.make_jaxpr(dense_mgpu.split3)(jnp.zeros(8, jnp.float32))
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "convert_element_type":
      assert eqn.invars[0].aval.dtype == jnp.float32, eqn


def test_packing_round_trips():
  """The kernel's layout of the parameters (W0 by CTA with b0 as input 784's row, padded, in
  three parts; W1 and b1 in one small matrix a CTA) gives back the parameters exactly; the
  batches are the examples of ``order``, pixels exact in bfloat16, input 784 at 255 (b0's)."""
  rng = np.random.default_rng(3)
  params, x, y, order = _setup(rng, 3)
  back = cluster_mlp_mgpu._unpack(*cluster_mlp_mgpu._pack(params))
  for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  xs, onehot = cluster_mlp_mgpu.batches(jnp.asarray(x), jnp.asarray(y), order, 3)
  assert xs.shape == (3, 64, 832) and onehot.shape == (3, 10, 64)
  rows = np.asarray(xs.astype(jnp.float32)).reshape(192, 832)
  np.testing.assert_array_equal(rows[:, :784], x[order[:192]].reshape(192, 784))
  assert (rows[:, 784] == 255).all() and not rows[:, 785:].any()
  np.testing.assert_array_equal(np.asarray(onehot).transpose(0, 2, 1).reshape(192, 10).argmax(1),
                                y[order[:192]])


def test_groups_split_and_join_exactly():
  """A network of 4 x 256 units as 4 networks of 256, its units in order, and back."""
  params, *_ = _setup(np.random.default_rng(4), 1, hidden=1024)
  parts = cluster_mlp_mgpu.split_groups(params, 4)
  np.testing.assert_array_equal(np.asarray(parts[0]["w"][2]), np.asarray(params[0]["w"][:, 512:768]))
  np.testing.assert_array_equal(np.asarray(parts[1]["w"][3]), np.asarray(params[1]["w"][768:]))
  for g in range(4):
    np.testing.assert_array_equal(np.asarray(parts[1]["b"][g]), np.asarray(params[1]["b"]))
  back = cluster_mlp_mgpu.join_groups(parts)
  for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(params)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("widths,kw,message", [
    ((784, 512, 10), {}, None), ((784, 1792, 10), {}, None),
    ((784, 300, 10), {}, None), ((784, 1, 10), {}, None),
    ((784, 2048, 10), {}, None),  # 8 groups: more than an H100 holds clusters (flat)
    ((784, 2049, 10), {}, "784-(1 .. 2048)-10 networks, not 784-2049-10"),
    ((784, 0, 10), {}, "not 784-0-10"),
    ((784, 512, 10), {"optimizer": "momentum"}, "plain SGD, not momentum"),
])
def test_networks_of_several_clusters(widths, kw, message, monkeypatch):
  monkeypatch.setattr(cluster_mlp_mgpu, "_jax_version", lambda: (0, 11))  # (flat: checked there)
  args = {"bias": True, "optimizer": "sgd", "dtype": jnp.float32, **kw}
  why = cluster_mlp_mgpu.problem(widths, 64, wide=True, **args)
  assert why is None if message is None else message in why
  # Without ``wide`` (a population's question) only 784-256-10.
  assert cluster_mlp_mgpu.problem(widths, 64, **args) is not None


@pytest.mark.parametrize("widths,batch,kw,message", [
    ((784, 512, 256, 10), 64, {}, "it trains 784-256-10 networks, not 784-512-256-10"),
    ((784, 10), 64, {}, "not 784-10"),
    ((784, 256, 10), 128, {}, "it takes batch 64, not 128"),
    ((784, 256, 10), 1024, {"wide": True}, "not 1024"),
    ((784, 256, 10), 64, {"bias": False}, "it has biases"),
    ((784, 256, 10), 64, {"optimizer": "momentum"}, "plain SGD, not momentum"),
    ((784, 256, 10), 64, {"dtype": np.float64}, "float32, not float64"),
])
def test_networks_it_cannot_take_are_named(widths, batch, kw, message):
  args = {"bias": True, "optimizer": "sgd", "dtype": jnp.float32, **kw}
  why = cluster_mlp_mgpu.problem(widths, batch, **args)
  assert why is not None and message in why and "\n" not in why
  assert cluster_mlp_mgpu.problem((784, 256, 10), 64, bias=True, optimizer="sgd",
                             dtype=jnp.float32) is None


@pytest.mark.parametrize("version", ["0.11.2", "0.12.0.1"])
def test_larger_batches_where_checked(monkeypatch, version):
  """A single network (``wide``) trains at 128 to 512 in passes of 64 (256 and 512 in four
  clusters) with jax 0.11 and 0.12, where they were checked on the GPU; jax 0.10 at 64 until it
  is; a population's member at 64."""
  args = {"bias": True, "optimizer": "sgd", "dtype": jnp.float32}
  monkeypatch.setattr(jax, "__version__", version)
  for batch in (64, 128, 256, 512):
    assert cluster_mlp_mgpu.problem((784, 256, 10), batch, wide=True, **args) is None
  assert "not 128" in cluster_mlp_mgpu.problem((784, 256, 10), 128, **args)
  monkeypatch.setattr(jax, "__version__", "0.10.2")
  assert "it takes batch 64, not 128" in cluster_mlp_mgpu.problem((784, 256, 10), 128,
                                                                  wide=True, **args)


@pytest.mark.parametrize("batch", [100, 32])
def test_batches_not_of_whole_passes_are_refused(batch):
  params, x, y, order = _setup(np.random.default_rng(8), 2)
  with pytest.raises(ValueError, match=f"batches of 64 P rows .*, not {batch}"):
    cluster_mlp_mgpu.train_epoch(params, jnp.asarray(x.reshape(-1, 784)), jnp.asarray(y), order,
                                 0.5, steps=1, batch=batch)


def test_batch_512_takes_one_cluster_of_units(monkeypatch):
  """Batch 512 runs in four clusters of the same 256 units: a wider network is refused there."""
  monkeypatch.setattr(jax, "__version__", "0.11.2")
  args = {"bias": True, "optimizer": "sgd", "dtype": jnp.float32, "wide": True}
  assert "batch 512 at up to 256 hidden units, not 512" in cluster_mlp_mgpu.problem(
      (784, 512, 10), 512, **args)
  assert cluster_mlp_mgpu.problem((784, 200, 10), 512, **args) is None


@pytest.mark.parametrize("hidden,batch,rowgroups", [(256, 64, 1), (256, 128, 1), (256, 256, 4),
                                                    (256, 512, 4), (200, 256, 4),
                                                    (512, 256, 1)])
@pytest.mark.parametrize("version", ["0.11.2", "0.12.0.1"])
def test_epoch_splits_large_batches_between_clusters(monkeypatch, hidden, batch, rowgroups,
                                                    version):
  """``train_epoch`` runs a 256-unit network's step of four passes or more in four clusters
  (``ROWGROUPS``) with jax 0.11 and 0.12, both checked on the GPU; a wider network's in its own
  clusters of units."""
  monkeypatch.setattr(jax, "__version__", version)
  seen = {}
  monkeypatch.setattr(cluster_mlp_mgpu, "train_steps",
                      lambda *a, **kw: seen.update(kw) or (None, None, None))
  params, x, y, order = _setup(np.random.default_rng(8), 1, hidden, batch)
  cluster_mlp_mgpu.train_epoch(params, x, y, order, 0.1, steps=1, batch=batch)
  assert seen["rowgroups"] == rowgroups and seen["passes"] == batch // 64


def test_a_gpu_that_holds_fewer_clusters_keeps_one(monkeypatch):
  """Where the four clusters would not all be resident (their grid barrier would never open),
  the step's passes stay in one cluster."""
  monkeypatch.setattr(jax, "__version__", "0.12.0.1")  # a jax that trains batch 512
  assert cluster_mlp_mgpu.rowgroups_for(256, 512) == 4
  monkeypatch.setattr(grid_barrier, "resident_clusters", lambda: 1)
  assert cluster_mlp_mgpu.rowgroups_for(256, 512) == 1
  args = {"bias": True, "optimizer": "sgd", "dtype": jnp.float32, "wide": True}
  assert "more than this GPU holds" in cluster_mlp_mgpu.problem((784, 256, 10), 512, **args)
