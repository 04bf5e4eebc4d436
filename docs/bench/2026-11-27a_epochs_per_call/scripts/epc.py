"""Epochs a call: each grid point's xla and pallas training with one epoch a call against the
automatic choice (jax_trainer.epochs_per_call), one process, alternating, medians of 5."""
import dataclasses, json, os, sys
from absl import flags
from benchmarks import bench, grid
from jaxshallow import paths
flags.FLAGS(["epc"])
out = []
for name in sys.argv[1].split(";"):
  point = grid.BY_NAME[name]
  for impl in ("xla", "pallas"):
    base = paths.resolve(grid.config_of(point, impl, data_dir=os.environ.get("JAXSHALLOW_DATA_DIR"),
                                        compilation_cache="off"))
    for k in (1, 0):
      cfg = dataclasses.replace(base, epochs_per_call=k)
      r = bench.measure(bench.Case("grid", cfg.model, impl, name, cfg, 5))
      row = dict(point=name, impl=impl, setting=k, epochs_per_call=r["epochs_per_call"],
                 path=r["path"], train_s=r["train_time_s"], compile_s=r["compile_time_s"],
                 losses=r["epoch_losses"])
      out.append(row)
      print(name, impl, k, round(r["train_time_s"], 4), flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "epc.json"), "w"), indent=1)
print(f"\n{'point':28} {'impl':7} {'k':>4} {'train s':>9} {'compile':>8}  path")
for i, r in enumerate(out):
  same = "" if r["setting"] == 1 else ("same losses" if r["losses"] == out[i - 1]["losses"] else "LOSSES DIFFER")
  print(f"{r['point']:28} {r['impl']:7} {r['epochs_per_call']:>4} {r['train_s']:9.4f} {r['compile_s']:8.2f}  {r['path']}  {same}")
