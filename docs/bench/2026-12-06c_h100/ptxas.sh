# ptxas' report (registers, spills, serialized wgmma) of the tile regression kernel in three of
# the fetch probe's forms: as it was then (before 2026-12-06c's changes); every product on the
# first parts; no products.
set -u
export PYTHONPATH=.
for v in "6 3 0" "6 3 1" "0 3 0"; do
  set -- $v
  echo "== products=$1 parts=$2 first_only=$3"
  MOSAIC_GPU_DUMP_PTXAS=1 timeout 200 python3 -c "
import jax, jax.numpy as jnp
from probes.grid_regression import problem
from pallas_kernels.fused import tile_regression_mgpu as k
args = [jnp.asarray(a) for a in problem(k, k.WIDTHS, 1, 4)]
jax.block_until_ready(k.train_steps(*args, 0.002, products=$1, parts=$2, first_only=bool($3)))
" 2>&1 | grep -v -i "warn" | grep -i "ptxas\|regist\|spill\|wgmma\|stack\|error" | head -20
done
