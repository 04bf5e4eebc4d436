"""Several epochs in one compiled call (``--epochs_per_call``): the same training, bit for bit,
as one epoch a call, on every path that trains through ``train_epochs``."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import init_mlp, make_optimizer, models, train
from jaxshallow.run import config, jax_trainer, runner

BASE = config.Config(model="regression", dataset="medium", epochs=4, hidden=(16,),
                     compilation_cache="off")


def _losses(**settings):
  result = runner.run(dataclasses.replace(BASE, **settings), log=lambda line: None)
  return result["epochs_per_call"], result["epoch_loss"], result["epoch_time_s"]


@pytest.mark.parametrize("impl,fusion", [("xla", None), ("pallas", "epoch"),
                                         ("pallas", "ops")])
def test_several_epochs_a_call_give_the_same_losses(impl, fusion):
  """The automatic choice (all 4 epochs in one call), 3 a call (a last call of 1, compiled
  apart) and 1 a call: the same losses; a call's epochs share its time."""
  k1, one, _ = _losses(impl=impl, fusion=fusion, epochs_per_call=1)
  k_auto, auto, times = _losses(impl=impl, fusion=fusion)
  k3, three, _ = _losses(impl=impl, fusion=fusion, epochs_per_call=3)
  assert (k1, k_auto, k3) == (1, 4, 3)
  assert auto == one and three == one
  assert len(times) == 4 and times[0] == times[3] > 0


def test_the_automatic_choice_divides_the_epochs():
  """About STEPS_PER_CALL steps a call, a divisor of the epochs, at least 1."""
  steps_per_call = jax_trainer.STEPS_PER_CALL
  choose = lambda epochs, steps, **kw: jax_trainer.epochs_per_call(
      config.Config(epochs=epochs, **kw), steps)
  assert choose(10, 937) == 1  # MNIST at batch 64
  assert choose(100, 100) == 10 and choose(100, 10) == 100 and choose(100, 1) == 100
  assert choose(10, 117) == 5  # batch 512: 8 would fit, 5 divides 10
  assert choose(7, 1) == 7 and choose(7, 200) == 1  # a prime: all or one
  assert choose(100, 10, epochs_per_call=3) == 3  # given: as given
  assert choose(2, 10, epochs_per_call=3) == 2  # at most the epochs
  assert choose(100, 1, dispatch="loop") == 1
  assert all(choose(e, s) * s <= max(steps_per_call, s) for e in (1, 12, 100) for s in (1, 7, 50))


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
@pytest.mark.parametrize("impl,fusion", [("xla", "ops"), ("pallas", "epoch")])
def test_a_call_carries_the_optimizer_state_as_epochs_do(optimizer, impl, fusion):
  """Two epochs in one call against two calls of one: the same params and optimizer state,
  bit for bit, Adam's step count included (its bias corrections go on counting)."""
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.uniform(-1, 1, (40, 12)), jnp.float32)
  y = jnp.sum(x ** 2, axis=1)
  orders = jnp.asarray(np.stack([rng.permutation(40) for _ in range(2)]), jnp.int32)
  tx = make_optimizer(optimizer, 1e-2)
  params = init_mlp(jax.random.key(0), (12, 24, 1), bias=False)
  kw = dict(tx=tx, batch_size=8, impl=impl, fusion=fusion, model=models.REGRESSION)
  p, s = params, tx.init(params)
  losses = []
  for e in range(2):
    p, s, m = train.train_epoch_no_donate(p, s, x, y, orders[e], **kw)
    losses.append(float(m["loss"]))
  p2, s2, m2 = train.train_epochs_no_donate(params, tx.init(params), x, y, orders, **kw)
  assert [float(v) for v in m2["loss"]] == losses
  for a, b in zip(jax.tree.leaves((p, s)), jax.tree.leaves((p2, s2)), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  if optimizer == "adam":
    assert int(jax.tree.leaves(s2)[0]) == 10  # optax's count: 2 epochs of 5 steps.


def test_an_epoch_at_a_time_from_a_trainer_of_several_a_call():
  """start_epoch (lockstep comparisons) on a trainer whose calls hold 2 epochs: each epoch's
  order is its call's row, and the losses are those of an epoch a call."""
  from jaxshallow.run import trainers
  _, one, _ = _losses(impl="xla", epochs_per_call=1)
  cfg = config.resolve(dataclasses.replace(BASE, impl="xla", epochs_per_call=2))
  trainer = trainers.make_trainer(cfg, runner.load_data(cfg))
  trainer.compile()
  assert trainer.epochs_per_call == 2
  assert [trainer.run_epoch(e) for e in range(4)] == one
