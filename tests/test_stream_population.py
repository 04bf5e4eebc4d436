"""stream_population_mgpu (a population of MLPs 784-256-10, their weights streamed from global
memory every step) on the CPU: the kernel lowers for a Hopper GPU (Mosaic GPU's checks of
layouts, shared memory and copies run at lowering), its packing round-trips, and its jnp twin
follows the project's float64 training step member by member (its GPU checks:
experiments.check_kernels --only=stream_population)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, train
from pallas_kernels import common
from pallas_kernels.fused import stream_population_mgpu as k

import mgpu_interpreter

SIZES = (784, 256, 10)


def _abstract(members=2, steps=2, sets=2):
  """train_steps' arguments as shapes: members' params and learning rates, ``sets`` of
  batches."""
  f32, shape = jnp.float32, jax.ShapeDtypeStruct
  params = [{"w": shape((members, a, b), f32), "b": shape((members, b), f32)}
            for a, b in zip(SIZES[:-1], SIZES[1:])]
  return (params, shape((members,), f32),
          shape((sets, steps, k.BATCH, k.INPUTS), jnp.bfloat16),
          shape((sets, steps, k.ROWS, k.BATCH), f32))


def _lowered(args, **kw) -> str:
  """train_steps(**kw) lowered for Hopper: its text, with its Mosaic GPU module."""
  text = (jax.jit(lambda *a: k.train_steps(*a, **kw)).trace(*args)
          .lower(lowering_platforms=("cuda",)).as_text())
  assert "mosaic_gpu" in text
  return text


@pytest.mark.parametrize("members,steps,sets,parts",
                         [(3, 2, 3, "all"), (2, 1, 1, "all"), (2, 2, 2, "walk"),
                          (2, 2, 2, "outputs")],
                         ids=["own", "shared", "walks-alone", "outputs-alone"])
def test_kernel_lowers(members, steps, sets, parts):
  """Both kinds of batches, and the probe's floors (the walks alone, the output layer alone)."""
  _lowered(_abstract(members, steps, sets), parts=parts)


def test_fresh_descriptors_lower():
  """``FRESH_DESCRIPTORS`` (each product's descriptors built where it runs; the default with
  the jax versions it was checked with on a GPU) lowers for Hopper, and differs from the
  form before it."""
  args = _abstract()
  assert _lowered(args, fresh_descriptors=False) != _lowered(args, fresh_descriptors=True)


def test_forms_lower_to_distinct_modules():
  """``AHEAD`` (two W0 tiles in flight, x shared: its shared memory fits; True is
  ``AHEAD_AT``'s) and ``REVERSE_ODD`` lower for Hopper, each form (and where ``AHEAD``
  fetches) a module of its own and other than the default's: none is dropped."""
  args = _abstract()
  forms = [{}, {"ahead": "store"}, {"ahead": "start"}, {"reverse_odd": True},
           {"ahead": True, "reverse_odd": True}]
  assert len({_lowered(args, **f) for f in forms}) == len(forms)
  with pytest.raises(ValueError, match="ahead: 'start', 'store' or False"):
    k.train_steps(*args, ahead="sideways")


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


@pytest.mark.skipif(mgpu_interpreter.problem() is not None,
                    reason=str(mgpu_interpreter.problem()))
@pytest.mark.parametrize("members,steps,shared,forms", [
    (2, 2, False, {}), (1, 3, True, {}), (2, 2, False, {"ahead": "store"}),
    (1, 2, False, {"ahead": "start"}), (1, 3, True, {"ahead": "store", "reverse_odd": True}),
    (1, 2, False, {"reverse_odd": True})],
    ids=["own", "shared", "ahead-own", "ahead-start-own", "ahead-reversed-shared",
         "reversed-own"])
def test_interpreted_kernel_is_near_float64(request, members, steps, shared, forms):
  """The kernel itself in Mosaic GPU's interpreter (both CTAs of a member and both warpgroups
  of each, with the race detector), in its forms: weights and losses within 1e-6 of its
  float64 twin's largest value, the correct counts equal, no race. The descriptors of the form
  before ``FRESH_DESCRIPTORS`` (that form's zero is written by every thread: a race by
  design). Each case in a process of its own (``mgpu_interpreter.in_own_process``)."""
  if mgpu_interpreter.in_own_process(request):
    return
  mgpu_interpreter.install()
  rng = np.random.default_rng(5)
  n = steps * k.BATCH + 3
  x = rng.integers(0, 256, (n, 784), dtype=np.uint8)
  y = rng.integers(0, 10, n).astype(np.int32)
  orders = np.stack([rng.permutation(n) for _ in range(1 if shared else members)])
  lrs = jnp.float32([0.1, 0.2][:members])
  params = _population(rng, members)
  xs, onehot = k.batches(jnp.asarray(x), jnp.asarray(y), jnp.asarray(orders), steps)
  got = jax.block_until_ready(k.train_steps(
      params, lrs, xs, onehot, fresh_descriptors=False, **forms,
      interpret=(("inline_mgpu", "ignore"), ("detect_races", True))))
  assert not mgpu_interpreter.races_found()
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), params)
    want = k.reference(p64, jnp.asarray(lrs, jnp.float64), xs.astype(jnp.float64),
                       onehot.astype(jnp.float64))
  for a, b in zip(jax.tree.leaves(got[:2]), jax.tree.leaves(want[:2])):
    a, b = np.asarray(a, np.float64), np.asarray(b)
    assert np.max(np.abs(a - b)) <= 1e-6 * np.max(np.abs(b))
  np.testing.assert_array_equal(np.asarray(got[2]), np.asarray(want[2]))


def test_batches_for_some_members_are_refused():
  rng = np.random.default_rng(2)
  params = _population(rng, 3)
  xs = jnp.zeros((2, 1, k.BATCH, k.INPUTS), jnp.bfloat16)
  with pytest.raises(ValueError, match="batches for 1 or 3 members, got 2"):
    k.train_steps(params, [0.1] * 3, xs, jnp.zeros((2, 1, k.ROWS, k.BATCH)))


@pytest.mark.parametrize("members,sets,chunk", [(5, 5, 2), (3, 1, 64)],
                         ids=["own-orders-in-chunks", "one-order"])
def test_epoch_gives_each_member_its_own_run(monkeypatch, members, sets, chunk):
  """``train_epoch_stream`` with the kernel's twin in its place, in float64: members in launches
  of at most ``STREAM_CHUNK`` (the last padded), on their own orders or one for all; each
  member's params, loss and accuracy those of its own run of the twin."""
  from jaxshallow.fused import epoch as fused_epoch, population as fused_population
  monkeypatch.setattr(fused_population, "STREAM_CHUNK", chunk)
  rng = np.random.default_rng(3)
  steps = 3
  n = steps * k.BATCH + 5
  x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
  y = rng.integers(0, 10, n).astype(np.int32)
  orders = np.stack([rng.permutation(n) for _ in range(sets)]).astype(np.int32)
  lrs = np.linspace(0.05, 0.3, members)
  with jax.enable_x64(True):
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), _population(rng, members))
    got, metrics = fused_population.train_epoch_stream(
        params, jnp.asarray(x), jnp.asarray(y), jnp.asarray(orders), jnp.asarray(lrs),
        batch_size=k.BATCH, twin=True)
    for i in range(members):
      p = jax.tree.map(lambda a: a[i:i + 1], params)
      xs, onehot = k.batches(jnp.asarray(x.reshape(n, -1)), jnp.asarray(y),
                             jnp.asarray(orders[i % sets][None]), steps)
      want, losses, correct = k.reference(p, lrs[i:i + 1], xs, onehot)
      for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b[0]), rtol=1e-10, atol=1e-13)
      want_m = fused_epoch.epoch_metrics(losses[0], correct[0], k.BATCH)
      np.testing.assert_allclose(float(metrics["loss"][i]), float(want_m["loss"]), rtol=1e-10)
      np.testing.assert_allclose(float(metrics["accuracy"][i]), float(want_m["accuracy"]),
                                 rtol=1e-12)  # (vmapped: the last bit may differ)


def test_population_refuses_the_stream_path_in_one_line(monkeypatch):
  """fusion="stream" says in one line why it cannot train: off Hopper; on Hopper (pretended)
  with a jax it was not checked with on a GPU; another batch; another network."""
  from jaxshallow import population as pop
  from pallas_kernels.fused import stream_population_mgpu
  from pallas_kernels.ops import dense_mgpu
  params = pop.init_params(lambda key: mlp.init_mlp(key, SIZES), [0, 1])
  images, labels = np.zeros((70, 28, 28), np.uint8), np.zeros(70, np.int32)
  orders, lrs = np.stack([np.arange(70)] * 2).astype(np.int32), np.full(2, 0.1, np.float32)
  run = lambda p, **kw: pop._epoch(p, None, jnp.asarray(images), jnp.asarray(labels),
                                   jnp.asarray(orders), jnp.asarray(lrs), optimizer="sgd",
                                   momentum=0.9, impl="pallas", fusion="stream",
                                   **{"batch_size": 64, **kw})
  with pytest.raises(ValueError, match="cannot train this population: it runs on Hopper") as e:
    run(params)
  assert "\n" not in str(e.value)
  monkeypatch.setattr(dense_mgpu, "on_hopper", lambda: True)
  monkeypatch.setattr(stream_population_mgpu, "CHECKED", ((0, 1),))
  with pytest.raises(ValueError, match=f"checked on a GPU with jax 0.1, not {jax.__version__}"):
    run(params)
  version = common.jax_version()
  monkeypatch.setattr(stream_population_mgpu, "CHECKED", (version,))
  with pytest.raises(ValueError, match="it takes batch 64, not 32"):
    run(params, batch_size=32)
  wide = pop.init_params(lambda key: mlp.init_mlp(key, (784, 512, 10)), [0, 1])
  with pytest.raises(ValueError, match="it trains 784-256-10, not 784-512-10"):
    run(wide)


def test_batches_pad_the_images_once():
  """batches pads the images (b0's input 255, zeros to 832) before gathering their rows: the
  same pixels as padding each gathered row, and the one-hot labels a class a row."""
  rng = np.random.default_rng(3)
  x = rng.integers(0, 256, (200, 784), dtype=np.uint8)
  labels = rng.integers(0, 10, 200).astype(np.int32)
  orders = np.stack([rng.permutation(200) for _ in range(3)]).astype(np.int32)
  xs, onehot = k.batches(jnp.asarray(x), jnp.asarray(labels), jnp.asarray(orders), steps=2)
  idx = orders[:, :2 * k.BATCH]
  want = np.zeros((3, 2 * k.BATCH, k.INPUTS), np.float32)
  want[:, :, :784], want[:, :, 784] = x[idx], 255
  assert xs.dtype == jnp.bfloat16 and xs.shape == (3, 2, k.BATCH, k.INPUTS)
  np.testing.assert_array_equal(np.asarray(xs, np.float32).reshape(want.shape), want)
  assert onehot.shape == (3, 2, k.ROWS, k.BATCH)
  np.testing.assert_array_equal(np.argmax(np.asarray(onehot), axis=2).reshape(3, -1),
                                labels[idx])


def test_probe_compares_forms(monkeypatch, capsys):
  """``probes.stream_population --forms`` (GPU only) runs its checks and rounds: here with the
  kernel replaced by its twin (each form then the same bits) and a clock that counts."""
  from probes import stream_population as probe
  monkeypatch.setattr(probe, "CHECK_STEPS", 2)
  monkeypatch.setattr(probe.k, "train_steps",
                      lambda *a, ahead=None, reverse_odd=False: k.reference(*a))
  calls = []
  probe.compare_forms(2, False, ["base", "ahead"], 3,
                      lambda fn, members: calls.append(fn.keywords) or 10.0 * len(calls))
  out = capsys.readouterr().out
  assert "ahead: 2 steps" in out and "the same bits as base" in out
  assert [c.get("ahead", False) for c in calls] == [False, "store", "store", False, False,
                                                    "store"]
  assert "median of 3 rounds: base 40.00, ahead 30.00" in out


def test_profile_sums_a_tile_scope_over_a_walk():
  """``hopper.per_walk``: a scope that a walk runs many times, summed a thread and walk."""
  from probes import hopper
  spans = {(0, "tile_wait"): [1.0, 2.0, 3.0, 4.0], (1, "tile_wait"): [2.0] * 4,
           (2, "tile_wait"): [5.0] * 4, (0, "walk"): [9.0, 9.0]}
  assert hopper.per_walk(spans, "tile_wait", walks=2) == 5.0  # (median of 5, 4, 10)
