"""The regression net's small set (100 epochs a call): the bench's whole-training time
(runner.timed_epochs after set_params, as bench.measure) against the trainer's call alone,
xla and pallas, median of 30, one process; then each part of timed_epochs."""
import time, statistics, numpy as np, jax
from jaxshallow.run import config, trainers, runner
from jaxshallow import paths
from benchmarks import grid
import sys; IMPLS = sys.argv[1:] or ("xla", "pallas")
print(jax.devices()[0].device_kind, jax.__version__, flush=True)
med = lambda ts: f"{1e3 * statistics.median(ts):.3f} ms"
for impl in IMPLS:
  cfg = paths.resolve(config.resolve(grid.config_of(grid.points(["regression small"])[0], impl)))
  ds = runner.load_data(cfg)
  init = jax.tree.map(np.asarray, trainers.init_params(cfg, ds))
  tr = trainers.make_trainer(cfg, ds, init); tr.compile()
  runner.timed_epochs(tr, cfg.epochs)
  a, b, c, d, e = [], [], [], [], []
  for r in range(30):
    tr.set_params(init)
    times, _ = runner.timed_epochs(tr, cfg.epochs, cfg.sync_every, cfg.overlap)
    a.append(sum(times))
    tr.set_params(init); jax.block_until_ready((tr.params, tr.opt_state))
    times, _ = runner.timed_epochs(tr, cfg.epochs, cfg.sync_every, cfg.overlap)
    b.append(sum(times))
    tr.set_params(init); jax.block_until_ready((tr.params, tr.opt_state))
    t = time.perf_counter()
    out = tr.fn(tr.params, tr.opt_state, *tr.data["train"], tr.orders[0])
    t1 = time.perf_counter()
    jax.block_until_ready(out)
    t2 = time.perf_counter()
    losses = [float(v) for v in np.asarray(out[2]["loss"])]
    t3 = time.perf_counter()
    c.append(t1 - t); d.append(t2 - t); e.append(t3 - t)
    tr.params, tr.opt_state = out[0], out[1]
  print(f"{impl} ({paths.describe(cfg)}, {type(tr.fn).__name__}): bench's timed_epochs {med(a)}; "
        f"with the params on the device first {med(b)}; the call's dispatch {med(c)}, to its end "
        f"{med(d)}, with the losses read {med(e)}", flush=True)
