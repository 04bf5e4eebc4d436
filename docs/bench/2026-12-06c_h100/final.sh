# The tile regression kernel as landed (one accumulator a product, w3 in shared memory, the CTA
# index read each step): check_kernels, then us a step, with ptxas' report.
set -u
export PYTHONPATH=.
MOSAIC_GPU_DUMP_PTXAS=1 timeout 250 python3 -m experiments.check_kernels --only=tile_regression \
  > $OUT/check.log 2>&1
grep -v -i warn $OUT/check.log | grep "ok \|FAIL\|distance\|spill\|Used\|rror"
echo "ptxas: wgmma waits injected at $(grep -c C7519 $OUT/check.log) places (both compiles)"
timeout 200 python3 -m probes.grid_regression --kernel=tile_regression 2>&1 | grep -v Warn
