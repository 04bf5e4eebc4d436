# Settles: whether the 32-256-256-1 phase kernel (grid_regression_mgpu, 15.8 us a step on the
# H100 against the 13.9 that 2x xla needs) spills as the tile regression kernel did (255
# registers, 1.8 KB a thread spilled, wgmma waits injected; 2026-12-06c). ptxas' report of its
# 100-step kernel, then its step time. Checkout root, Hopper GPU; about 1 minute.
set -u
export PYTHONPATH=.
MOSAIC_GPU_DUMP_PTXAS=1 timeout 200 python3 -m probes.grid_regression 2>&1 \
  | grep -v -i warn | grep -v C7519 | tee $OUT/grid_regression_ptxas.txt
