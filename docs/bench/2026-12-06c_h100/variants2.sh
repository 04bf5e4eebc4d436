# The tile regression kernel with the CTA index read again from shared memory each step (and one
# accumulator a product, w3 in shared memory): ptxas' registers and spills, the checks, us a step.
set -u
export PYTHONPATH=.
for v in "1 1 1"; do
  log=$OUT/variant_${v// /_}.log
  MOSAIC_GPU_DUMP_PTXAS=1 timeout 280 python3 docs/bench/2026-12-06c_h100/variants.py $v \
    > $log 2>&1
  grep -v -i warn $log | grep "form\|spill\|Used\|steps\|us a step\|rror" | grep -v "float32 dist"
  echo "  ptxas: wgmma waits injected at $(grep -c C7519 $log) places (all compiles)"
done
