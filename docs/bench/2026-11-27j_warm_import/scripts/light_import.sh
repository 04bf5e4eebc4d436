#!/bin/bash
# #54: a warm run's Mosaic GPU import, light (the runtime's path only) against the full import;
# end to end of the MLP and softmax regression, pallas light and full, xla (H100, jax 0.11.2).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
for i in 1 2 3; do
python3 -c "
import time, jax; jax.devices(); t = time.perf_counter()
from jax._src.lib import mosaic_gpu; a = time.perf_counter() - t; t = time.perf_counter()
import jax.experimental.mosaic.gpu; b = time.perf_counter() - t
print(f'extension {a:.3f} s, then the rest of Mosaic GPU {b:.3f} s')" 2>&1 | grep -v "^W\|^I0"
done | tee $OUT/import_times.txt
timeout 200 python3 -m benchmarks.end_to_end --workloads=mlp,logreg --impls=xla,pallas --out_dir=$OUT/light > $OUT/light.log 2>&1; echo "light rc $?"; grep "^|" $OUT/light/END_TO_END.md
JAXSHALLOW_LIGHT_MOSAIC_IMPORT=0 timeout 150 python3 -m benchmarks.end_to_end --workloads=mlp,logreg --impls=pallas --out_dir=$OUT/full > $OUT/full.log 2>&1; echo "full rc $?"; grep "^|" $OUT/full/END_TO_END.md
grep -i "host symbol\|notice\|warn" $OUT/light.log | head -5
