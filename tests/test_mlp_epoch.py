"""The whole-epoch kernel (pallas_kernels.fused.mlp_epoch) in its per-phase form, interpreted on the
CPU, against train_step through XLA: float64 trajectories to 1e-10, float32 losses to 1e-5.
On a GPU, experiments.check_kernels checks the one-launch form and its grid barrier."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import init_mlp, make_optimizer, models, train
from pallas_kernels.fused import mlp_epoch
from kernel_checks import assert_trajectory_close


def xla_steps(params, x, y, order, tx, batch, steps, model):
  state, losses = tx.init(params), []
  for s in range(steps):
    idx = order[s * batch:(s + 1) * batch]
    params, state, m = train.train_step(params, state, (x[idx], y[idx]), tx=tx, model=model)
    losses.append(float(m["loss"]))
  return params, state, np.array(losses)


# (widths, batch, optimizer, programs): batch 1 and 7, widths that no block divides, a last
# program with fewer tiles (programs below the tile count), depth 1 to 3; the mse head (one
# output, whose products are broadcasts and sums) at each depth.
CASES = [((20, 70, 10), 7, "sgd", 3), ((20, 10), 1, "sgd", 1), ((33, 40, 17, 3), 7, "momentum", 5),
         ((8, 24, 30, 1), 6, "sgd", 3), ((12, 40, 1), 5, "momentum", 2), ((9, 1), 4, "sgd", 1),
         ((20, 70, 10), 7, "adam", 3), ((33, 40, 17, 3), 7, "adam", 5), ((12, 40, 1), 5, "adam", 2)]


def test_one_barrier_a_step_where_layer_0_has_one_input_tile():
  """Two layers whose inputs fit one tile (the regression nets, (20, 70, 10) and (12, 40, 1)
  above) run F_0 and F_1 as one phase; the MLP's 784 inputs take several tiles."""
  plan = lambda widths, head: mlp_epoch.make_plan(widths, 256, 1, head=head)
  assert plan((32, 256, 1), "mse").merged and len(mlp_epoch.phases(plan((32, 256, 1), "mse"))) == 2
  assert plan((20, 70, 10), "xent").merged and plan((12, 40, 1), "mse").merged
  assert not plan((784, 256, 10), "xent").merged
  assert not plan((32, 256, 256, 1), "mse").merged  # Three layers.


def test_tiles_for_wide_mlps_and_batch_128():
  """Split products for the MLP at 33 to 64 rows with a hidden layer of 512 units: in tiles of 32
  with more than one hidden layer, of 64 with one of 1024 units, of 16 with one of 512; elsewhere
  IEEE float32 products in tiles of 16; reduced precisions never split. uint8 pixels enter split
  products as integers by default."""
  pick = lambda widths, batch, head="xent", precision="float32": mlp_epoch.tiles_for(
      widths, batch, head, precision)
  assert pick((784, 1024, 10), 64) == (64, True) and pick((784, 1024, 10), 40) == (64, True)
  assert pick((784, 512, 256, 10), 64) == (32, True)
  assert pick((784, 256, 1024, 256, 10), 64) == (32, True)
  assert pick((784, 512, 10), 64) == (16, True) and pick((784, 256, 256, 10), 64) == (16, False)
  assert pick((784, 1024, 10), 128) == (16, False) and pick((784, 1024, 10), 32) == (16, False)
  assert pick((784, 10), 64) == (16, False) and pick((32, 1024, 1), 64, "mse") == (16, False)
  assert pick((784, 1024, 10), 64, precision="tf32") == (16, False)
  plan = mlp_epoch.make_plan((784, 512, 256, 10), 64, 1)
  assert plan.split and plan.products == "split" and plan.hidden_block == 32 and plan.int_inputs
  assert not mlp_epoch.make_plan((784, 256, 10), 64, 1).int_inputs  # No split products.
  assert not mlp_epoch.make_plan((784, 512, 256, 10), 64, 1, scale_u8=False).int_inputs
  with pytest.raises(ValueError, match="split products are float32's"):
    mlp_epoch.make_plan((784, 512, 256, 10), 64, 1, precision="tf32", split=True)


# Two layers with one input tile (F_0 and F_1 merged); three layers over several input tiles
# (every phase, split products in a middle layer's gradient too). A case a test, so that the
# suite's workers share them (about 12 s each on the CPU).
@pytest.mark.parametrize("widths,batch,optimizer", [
    ((20, 70, 10), 7, "sgd"), ((20, 70, 10), 7, "momentum"), ((20, 70, 10), 7, "adam"),
    ((150, 70, 40, 10), 9, "sgd")])
def test_split_products_against_float64(widths, batch, optimizer):
  """A float32 plan with split products (bfloat16 parts, interpreted on the CPU), the pixels
  split or as integers (``int_inputs``), stays within float32's tolerance of the float64
  trajectory, at widths no tile divides and with each optimizer; its products differ from the
  IEEE ones (the split path ran)."""
  steps, rng = 3, np.random.default_rng(0)
  n = steps * batch
  x = jnp.asarray(rng.integers(0, 256, (n, widths[0])), jnp.uint8)
  y = jnp.asarray(rng.integers(0, 10, n), jnp.int32)
  order = jnp.arange(n, dtype=jnp.int32)
  tx = make_optimizer(optimizer, 1e-2 if optimizer == "adam" else 0.1)
  params = init_mlp(jax.random.key(0), widths)
  with jax.enable_x64(True):
    p64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), params)
    want_params, _, want = xla_steps(p64, jnp.asarray(x, jnp.float64) / 255, y, order, tx,
                                     batch, steps, models.MLP)
  runs = [mlp_epoch.train_epoch(params, None, x, y, order, tx.lr, tx.momentum, fused=False,
                                interpret=True, plan=mlp_epoch.make_plan(
                                    widths, batch, steps, max_programs=3, hidden_block=32,
                                    momentum=optimizer == "momentum", adam=optimizer == "adam",
                                    split=split, int_inputs=int_inputs))
          for split, int_inputs in ((True, False), (True, True), (False, False))]
  for run in runs[:2]:
    np.testing.assert_allclose(run[2], want, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(run[0]), jax.tree.leaves(want_params)):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  # Each path ran: three sets of products, three roundings.
  w0 = [np.asarray(run[0][0]["w"]) for run in runs]
  assert not np.array_equal(w0[0], w0[2]) and not np.array_equal(w0[1], w0[0])


# Wider hidden tiles (Plan.hidden_block), at depths 2 and 3, with each optimizer.
BLOCK_CASES = [((20, 70, 10), 7, "sgd", 3, 32), ((33, 40, 17, 3), 7, "momentum", 2, 32),
               ((12, 70, 1), 5, "adam", 2, 64), ((8, 40, 70, 1), 6, "sgd", 3, 32)]


@pytest.mark.parametrize("widths,batch,optimizer,programs,hidden_block",
                         [(*c, mlp_epoch.HIDDEN_BLOCK) for c in CASES] + BLOCK_CASES)
def test_float64_trajectory_matches_xla(widths, batch, optimizer, programs, hidden_block):
  head = "mse" if widths[-1] == 1 else "xent"
  seed = int(np.random.default_rng().integers(2**31))
  steps, rng = 3, np.random.default_rng(seed)
  n = steps * batch + 2
  with jax.enable_x64(True):
    x = jnp.asarray(rng.random((n, widths[0])))
    y = (jnp.asarray(rng.integers(0, widths[-1], n), jnp.int32) if head == "xent"
         else jnp.sum(x ** 2, axis=1))
    params = init_mlp(jax.random.key(1), widths, dtype=jnp.float64, bias=head == "xent")
    order = jnp.asarray(rng.permutation(n), jnp.int32)
    tx = make_optimizer(optimizer, 1e-2 if optimizer == "adam" else 0.1 if head == "xent" else 0.01)
    model = models.MLP if head == "xent" else models.REGRESSION
    ref_params, ref_state, ref_losses = xla_steps(params, x, y, order, tx, batch, steps, model)
    plan = mlp_epoch.make_plan(widths, batch, steps, head=head, bias=head == "xent",
                               momentum=optimizer == "momentum", adam=optimizer == "adam",
                               max_programs=programs, hidden_block=hidden_block)
    assert plan.programs == programs
    got, slots, losses, _ = mlp_epoch.train_epoch(params, None, x, y, order, tx.lr, tx.momentum,
                                                  plan=plan, fused=False, interpret=True)
  np.testing.assert_allclose(losses, ref_losses, rtol=1e-10, atol=1e-12, err_msg=f"seed {seed}")
  assert_trajectory_close(jax.tree.leaves(got), jax.tree.leaves(ref_params), f"seed {seed}")
  if optimizer != "sgd":  # optax's state: momentum's trace; Adam's count, mu and nu.
    want = [b for b in jax.tree.leaves(ref_state) if np.ndim(b)]
    assert_trajectory_close(jax.tree.leaves(slots), want, f"seed {seed}")


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_train_epoch_fusion_epoch_float32(optimizer):
  """The Python API: train_epoch(impl="pallas", fusion="epoch") on uint8 images, against the
  xla scan: per-step losses agree, hence the epoch's mean loss and accuracy."""
  # Fixed inputs: two float32 impls may put a pre-activation within rounding of 0 on different
  # sides of a ReLU. Fresh inputs are drawn where float64 is compared.
  rng = np.random.default_rng(0)
  x = rng.integers(0, 256, (200, 28, 28), dtype=np.uint8)
  y = rng.integers(0, 10, 200).astype(np.uint8)
  order = rng.permutation(200).astype(np.int32)
  tx = make_optimizer(optimizer, 1e-3 if optimizer == "adam" else 0.1)
  params = init_mlp(jax.random.key(0), (784, 32, 10))
  out = {}
  for impl, fusion in (("xla", "ops"), ("pallas", "epoch")):
    out[fusion] = train.train_epoch(jax.tree.map(jnp.array, params), tx.init(params), x, y,
                                    order, tx=tx, batch_size=32, impl=impl, fusion=fusion)
  (p1, s1, m1), (p2, s2, m2) = out["ops"], out["epoch"]
  assert abs(float(m1["loss"]) / float(m2["loss"]) - 1) < 1e-5
  assert float(m1["accuracy"]) == float(m2["accuracy"])
  for a, b in zip(jax.tree.leaves((p1, s1)), jax.tree.leaves((p2, s2))):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fusion_epoch_refuses_what_it_cannot_train():
  params = init_mlp(jax.random.key(0), (784, 32, 10))
  images, labels = np.zeros((64, 28, 28), np.uint8), np.zeros(64, np.uint8)
  order = np.arange(64, dtype=np.int32)
  optax = __import__("optax")
  for tx, match in ((optax.sgd(0.1), "make tx with jaxshallow.make_optimizer"),
                    (optax.adamw(0.1), "make tx with jaxshallow.make_optimizer")):
    with pytest.raises(ValueError, match=match):
      train.train_epoch(params, tx.init(params), images, labels, order, tx=tx, batch_size=64,
                        impl="pallas", fusion="epoch")
  big = np.zeros((600, 28, 28), np.uint8), np.zeros(600, np.uint8)
  tx = make_optimizer("sgd", 0.1)
  with pytest.raises(ValueError, match="over the 512 rows"):
    train.train_epoch(params, tx.init(params), *big, np.arange(600, dtype=np.int32), tx=tx,
                      batch_size=513, impl="pallas", fusion="epoch")


def test_float_images_never_reach_the_cluster_kernel():
  """The MLP's cluster kernel takes uint8 pixels (integers in bfloat16): given float images, the
  epoch runs the grid kernel instead, with its results (not pixels 255 times too small)."""
  from jaxshallow.fused import epoch as fused_epoch
  rng = np.random.default_rng(1)
  x = rng.random((70, 28, 28), np.float32)
  y = rng.integers(0, 10, 70).astype(np.int32)
  order = rng.permutation(70).astype(np.int32)
  tx = make_optimizer("sgd", 0.1)
  params = init_mlp(jax.random.key(0), (784, 16, 10))
  got = {kernel: fused_epoch.run(params, tx.init(params), jnp.asarray(x), jnp.asarray(y),
                                 jnp.asarray(order), tx=tx, steps=2, batch_size=32,
                                 precision="float32", model=models.MLP, kernel=kernel)
         for kernel in ("cluster_mlp", "grid")}
  for a, b in zip(jax.tree.leaves(got["cluster_mlp"]), jax.tree.leaves(got["grid"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_one_launch_form_aliases_its_barrier_counter():
  """The one-launch kernel (lowered for a GPU here; run by check_kernels there) writes its grid
  barrier's counter: the counter comes in aliased to an output, as the state does, so that no
  launch can start from a count an earlier one left (a constant buffer XLA kept)."""
  import functools
  widths, batch, steps = (20, 30, 10), 7, 2
  plan = mlp_epoch.make_plan(widths, batch, steps, max_programs=4)
  x, y = jnp.zeros((14, 20), jnp.uint8), jnp.zeros(14, jnp.int32)
  f = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan, fused=True))
  try:
    text = f.trace(init_mlp(jax.random.key(0), widths), None, x, y,
                   jnp.arange(14, dtype=jnp.int32), 0.1, 0.0).lower(
                       lowering_platforms=("cuda",)).as_text()
  except RuntimeError as e:  # jax 0.12 lowers Triton kernels only with a GPU present.
    if "No supported GPU devices" not in str(e):
      raise
    pytest.skip("this jax lowers Triton kernels only on a GPU")
  assert text.count("#stablehlo.output_operand_alias<") == len(mlp_epoch.state_names(plan)) + 1
  stress = jax.jit(lambda: mlp_epoch.barrier_stress(4, 3)).trace().lower(
      lowering_platforms=("cuda",)).as_text()
  assert stress.count("#stablehlo.output_operand_alias<") == 1
