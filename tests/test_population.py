"""Populations (many networks in one program), data-parallel training, and several devices and
processes on the CPU.

Several CPU devices need ``--xla_force_host_platform_device_count`` before jax starts, so those
tests run the scripts (or a few lines of Python) in fresh processes.
"""

import json
import os
import socket
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxshallow import mlp, models, population as pop, train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rel_err(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def _problem(rng, n, dtype):
  x = rng.random((n, 20)).astype(dtype)
  y = rng.integers(0, 10, n).astype(np.int32)
  return x, y


@pytest.mark.parametrize("impl,optimizer,fusion", [
    ("xla", "sgd", "ops"), ("xla", "momentum", "ops"), ("xla", "adam", "ops"),
    ("pallas", "momentum", "ops"), ("pallas", "sgd", "step")])
def test_members_follow_their_single_runs_float64(impl, optimizer, fusion):
  """Each member (own seed: init and batch order; own lr) trains as it would alone; with
  fusion="step", through the population step kernels, as the op kernels train it alone."""
  seeds, lrs = [3, 5, 8], [0.05, 0.2, 0.1]
  with jax.enable_x64(True):
    x, y = _problem(np.random.default_rng(), 70, np.float64)
    init = lambda key: mlp.init_mlp(key, (20, 12, 10), dtype=jnp.float64)
    params = pop.init_params(init, seeds)
    state = pop.init_opt_state(optimizer, params)
    orders = pop.epoch_orders(seeds, 0, len(y))
    got_p, _, got_m = pop.train_epoch(params, state, x, y, orders, jnp.asarray(lrs),
                                      optimizer=optimizer, momentum=0.9, batch_size=16,
                                      impl=impl, fusion=fusion)
    for i, (seed, lr) in enumerate(zip(seeds, lrs)):
      tx = train.make_optimizer(optimizer, lr)
      p = init(jax.random.key(seed))
      want_p, _, want_m = train.train_epoch(p, tx.init(p), x, y, jnp.asarray(orders[i]), tx=tx,
                                            batch_size=16, impl=impl)
      assert rel_err(got_m["loss"][i], want_m["loss"]) < 1e-10
      for a, b in zip(jax.tree.leaves(pop.member(got_p, i)), jax.tree.leaves(want_p)):
        assert rel_err(a, b) < 1e-10


@pytest.mark.parametrize("optimizer,lrs", [("momentum", [0.05, 0.1]), ("adam", [1e-3, 3e-3])])
def test_cnn_members_on_the_step_kernels_follow_their_single_runs_float64(optimizer, lrs):
  """The CNN's step kernels under vmap, each member its own seed, order and lr (a traced value
  the kernels read): each member as xla trains it alone, to rounding in float64."""
  from jaxshallow import cnn
  seeds, side = [1, 4], 12
  rng = np.random.default_rng()
  images = np.zeros((16, side, side), np.uint8)
  images[:, 3:9, 3:9] = rng.integers(0, 256, (16, 6, 6))
  labels = rng.integers(0, 10, 16).astype(np.int32)
  with jax.enable_x64(True):
    init = lambda key: jax.tree.map(lambda a: a.astype(jnp.float64), cnn.init_cnn(key, side))
    x = jnp.asarray(images, jnp.float64) / 255
    params = pop.init_params(init, seeds)
    state = pop.init_opt_state(optimizer, params)
    orders = pop.epoch_orders(seeds, 0, len(labels))
    got_p, _, got_m = pop.train_epoch(params, state, x, labels, orders, jnp.asarray(lrs),
                                      optimizer=optimizer, momentum=0.9, batch_size=4,
                                      impl="pallas", model=models.CNN, fusion="step")
    for i, (seed, lr) in enumerate(zip(seeds, lrs)):
      tx = train.make_optimizer(optimizer, lr)
      p = init(jax.random.key(seed))
      want_p, _, want_m = train.train_epoch(p, tx.init(p), x, labels, jnp.asarray(orders[i]),
                                            tx=tx, batch_size=4, model=models.CNN)
      assert rel_err(got_m["loss"][i], want_m["loss"]) < 1e-10
      for a, b in zip(jax.tree.leaves(pop.member(got_p, i)), jax.tree.leaves(want_p)):
        assert rel_err(a, b) < 1e-10


def test_members_float32_match_single_runs():
  """float32: the same losses and accuracies as the single runs (lockstep, one epoch)."""
  seeds, lrs = [0, 1, 2, 3], [0.1, 0.1, 0.5, 0.5]
  x, y = _problem(np.random.default_rng(0), 200, np.float32)
  init = lambda key: mlp.init_mlp(key, (20, 32, 10))
  params = pop.init_params(init, seeds)
  orders = pop.epoch_orders(seeds, 0, len(y))
  _, _, got = pop.train_epoch(params, pop.init_opt_state("sgd", params), x, y, orders,
                              jnp.asarray(lrs, jnp.float32), optimizer="sgd", momentum=0.9,
                              batch_size=32)
  for i, (seed, lr) in enumerate(zip(seeds, lrs)):
    tx = train.make_optimizer("sgd", lr)
    p = init(jax.random.key(seed))
    _, _, want = train.train_epoch(p, tx.init(p), x, y, jnp.asarray(orders[i]), tx=tx,
                                   batch_size=32)
    assert abs(float(got["loss"][i]) / float(want["loss"]) - 1) < 1e-5
    assert abs(float(got["accuracy"][i]) - float(want["accuracy"])) <= 1 / 192


def test_population_evaluate_matches_evaluate():
  """Fixed inputs: the vmapped and the single evaluation differ by rounding (7e-8 in a logit),
  which can flip a near-tied row of a fresh draw."""
  x, y = _problem(np.random.default_rng(0), 90, np.float32)
  init = lambda key: mlp.init_mlp(key, (20, 8, 10))
  params = pop.init_params(init, [0, 1])
  got = pop.evaluate(params, x, y, batch_size=40)
  for i in range(2):
    want = train.evaluate(pop.member(params, i), x, y, batch_size=40)
    assert abs(got["loss"][i] / want["loss"] - 1) < 1e-5
    assert got["accuracy"][i] == want["accuracy"]


# Scripts in fresh processes, with several CPU devices ------------------------------------------

SWEEP = ["-m", "experiments.sweep", "--model=regression", "--dataset=small", "--epochs=2",
         "--seeds=0-2", "--lrs=0.01,0.02"]


def _xla_flags(devices: int) -> str:
  """XLA_FLAGS with ``devices`` host devices, the suite's other flags kept (conftest)."""
  return f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"


def _run(args, devices=1, check=True, **env):
  env = {**os.environ, "XLA_FLAGS": _xla_flags(devices), "PYTHONPATH": ROOT, **env}
  p = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                     timeout=600)
  if check:
    assert p.returncode == 0, p.stderr[-3000:]
  return p


def _scores(path):
  r = json.loads(open(path).read())
  return {(m["seed"], m["lr"]): m["final_mse"] for m in r["members"]}, r


def test_sweep_population_over_devices_matches_one_device(tmp_path):
  """Six members over 4 devices, in chunks of 4 (the second padded with repeats, dropped), give
  the scores of one device; member (0, 0.02) those of the single run with that seed and lr."""
  _run(SWEEP + [f"--out={tmp_path}/one.json", "--devices=1"], devices=4)
  p = _run(SWEEP + [f"--out={tmp_path}/four.json", "--population_chunk=4",
                    f"--plot={tmp_path}/plot.png"], devices=4)
  assert "6 networks on 4 device(s)" in p.stdout
  one, _ = _scores(tmp_path / "one.json")
  four, r = _scores(tmp_path / "four.json")
  assert r["devices"] == 4 and r["members_per_program"] == 4 and len(r["members"]) == 6
  assert set(one) == set(four)
  for key in one:
    assert abs(four[key] / one[key] - 1) < 1e-5, key
  assert {row["lr"] for row in r["summary"]} == {0.01, 0.02}
  assert all(row["members"] == 3 and row["min"] <= row["mean"] <= row["max"]
             for row in r["summary"])
  # The regression data come from --seed (0 here) for every member, as for the single run.
  _run(["-m", "experiments.regression", "--size=small", "--epochs=2", "--lr=0.02", "--seed=0",
        f"--out={tmp_path}/single.json"])
  single = json.loads(open(tmp_path / "single.json").read())
  assert abs(four[(0, 0.02)] / single["final_mse"] - 1) < 1e-5


@pytest.mark.parametrize("fusion,path", [("ops", "ops"), ("epoch", "step")])
def test_pallas_population_over_devices_matches_one_device(tmp_path, real_data_dir, fusion, path):
  """Each pallas path (interpret mode) with the members over 2 devices, each device training
  its own under shard_map: the losses and scores of one device."""
  args = ["-m", "experiments.sweep", "--impl=pallas", f"--fusion={fusion}", "--model=mlp",
          "--hidden=32", "--train_limit=2048", "--holdout=512", "--epochs=1", "--seeds=0-3",
          "--lrs=0.1", f"--data_dir={real_data_dir}"]
  _run(args + [f"--out={tmp_path}/one.json", "--devices=1"], devices=2)
  _run(args + [f"--out={tmp_path}/two.json"], devices=2)
  one, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
  assert two["devices"] == 2 and two["fusion"] == path and one["fusion"] == path
  for a, b in zip(one["members"], two["members"]):
    assert (a["seed"], a["lr"]) == (b["seed"], b["lr"])
    assert np.allclose(a["epoch_loss"], b["epoch_loss"], rtol=1e-5)
    assert abs(a["test_loss"] / b["test_loss"] - 1) < 1e-5


def test_kernel_paths_over_devices_match_one_device():
  """The paths whose kernels train every member in one launch (a cluster a member, a CTA a
  member for softmax regression, the streamed kernel), with the kernels' twins in their place
  and 4 members over 2 devices under shard_map: in float64 the params and metrics of one device,
  within 1e-12 (their twins follow each member's own run: test_cluster_population)."""
  code = """
import functools, jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from jaxshallow import mlp, models, population as pop
from jaxshallow.devices import placement
from jaxshallow.fused import population as fp
for name in ("train_epoch_clusters", "train_epoch_stream"):
  setattr(fp, name, functools.partial(getattr(fp, name), twin=True))
fp.cluster_problem = fp.stream_problem = lambda *a, **k: None  # (the GPU's conditions)
rng = np.random.default_rng()
n, members = 3 * 64 + 5, 4
x = jnp.asarray(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
y = jnp.asarray(rng.integers(0, 10, n).astype(np.int32))
orders = np.stack([rng.permutation(n) for _ in range(members)]).astype(np.int32)
lrs = np.asarray([0.05, 0.1, 0.2, 0.3])
the_mesh = placement.mesh(jax.devices()[:2], pop.AXIS)
for model, widths, fusion in ((models.MLP, (784, 256, 10), "cluster"),
                              (models.MLP, (784, 256, 10), "stream"),
                              (models.LOGREG, (784, 10), "cluster")):
  params = pop.init_params(lambda k: mlp.init_mlp(k, widths, dtype=jnp.float64), range(members))
  kw = dict(optimizer="sgd", momentum=0.9, batch_size=64, impl="pallas", model=model,
            fusion=fusion)
  want = pop.train_epoch(jax.tree.map(jnp.array, params),
                         pop.init_opt_state("sgd", params), x, y, orders, lrs, **kw)
  sharded = lambda a: placement.shard(np.asarray(a), the_mesh)
  got = pop.sharded_epoch(the_mesh, **kw)(
      jax.tree.map(sharded, params), pop.init_opt_state("sgd", params), x, y, sharded(orders),
      sharded(lrs))
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-15)
  print(model.name, fusion, "ok")
print(len(jax.devices()), "devices ok")
"""
  p = _run(["-c", code], devices=2)
  assert p.stdout.count(" ok") == 4 and "2 devices ok" in p.stdout, p.stdout


def test_data_parallel_float64_matches_one_device():
  code = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from jaxshallow import mlp, train
from jaxshallow.devices import data_parallel as dp
rng = np.random.default_rng()
x, y = rng.random((300, 20)), rng.integers(0, 10, 300).astype(np.int32)
p = mlp.init_mlp(jax.random.key(0), (20, 16, 10), dtype=jnp.float64)
order = jnp.asarray(train.epoch_order(0, 0, 300))
for name in ("sgd", "momentum", "adam"):
  tx = train.make_optimizer(name, 0.05)
  want = train.train_epoch_no_donate(p, tx.init(p), x, y, order, tx=tx, batch_size=64)
  q = jax.tree.map(jnp.array, p)
  got = dp.train_epoch(q, tx.init(q), x, y, order, tx=tx, batch_size=64, the_mesh=dp.mesh())
  errs = [np.linalg.norm(a - b) / np.linalg.norm(b)
          for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want))]
  assert max(errs) < 1e-10, (name, max(errs))
print(len(jax.devices()), "devices ok")
"""
  p = _run(["-c", code], devices=4)
  assert "4 devices ok" in p.stdout


def test_data_parallel_cli(tmp_path):
  args = ["-m", "experiments.regression", "--size=small", "--epochs=2"]
  _run(args + [f"--out={tmp_path}/a.json"], devices=4)
  _run(args + ["--data_parallel", f"--out={tmp_path}/b.json"], devices=4)
  a, b = (json.loads(open(tmp_path / f).read()) for f in ("a.json", "b.json"))
  assert b["data_parallel"] and abs(b["final_mse"] / a["final_mse"] - 1) < 1e-4
  bad = _run(args + ["--data_parallel", "--batch_size=30"], devices=4, check=False)
  assert bad.returncode != 0 and "multiple of the 4 devices" in bad.stderr
  assert "Traceback" not in bad.stderr


def _free_port():
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def test_two_processes_train_one_population(tmp_path):
  """Two processes (loopback coordinator, gloo collectives), two CPU devices each: one
  population over four devices, reported by process 0 with the scores of one process."""
  _run(SWEEP + [f"--out={tmp_path}/one.json"], devices=1)
  port = _free_port()
  env = {**os.environ, "XLA_FLAGS": _xla_flags(2), "PYTHONPATH": ROOT}
  procs = [subprocess.Popen(
      [sys.executable, *SWEEP, f"--coordinator_address=localhost:{port}", "--num_processes=2",
       f"--process_id={i}", f"--out={tmp_path}/p{i}.json"],
      cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
      for i in range(2)]
  outs = [p.communicate(timeout=600) for p in procs]
  for p, (_, err) in zip(procs, outs):
    assert p.returncode == 0, err[-3000:]
  assert "6 networks on 4 device(s)" in outs[0][0]
  assert not (tmp_path / "p1.json").exists()  # Process 0 writes the results.
  one, _ = _scores(tmp_path / "one.json")
  two, r = _scores(tmp_path / "p0.json")
  assert r["devices"] == 4
  for key in one:
    assert abs(two[key] / one[key] - 1) < 1e-5, key


@pytest.mark.parametrize("args,message", [
    (["--seeds=a-b"], "seeds must be like"),
    (["--lrs=0.1,-1"], "lrs must be positive"),
    (["--devices=9"], "but there are 1 devices"),
    (["--data_parallel"], "a population spreads its members"),
    (["--num_processes=2"], "need a coordinator address"),
])
def test_sweep_errors_are_one_line(args, message):
  p = _run(SWEEP + args, check=False)
  assert p.returncode != 0 and message in p.stderr and "Traceback" not in p.stderr
