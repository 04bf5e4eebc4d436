# The tile regression kernel in four forms (one accumulator a product or one a half of K; w3 in
# registers or in shared memory): ptxas' registers and spills, the checks, us a step.
set -u
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for v in "0 0" "1 0" "0 1" "1 1"; do
  log=$OUT/variant_${v/ /_}.log
  MOSAIC_GPU_DUMP_PTXAS=1 timeout 280 python3 docs/bench/2026-12-06c_h100/variants.py $v \
    > $log 2>&1
  grep -v -i warn $log | grep "form\|spill\|Used\|steps\|us a step\|rror" | grep -v "float32 dist"
  echo "  ptxas: wgmma waits injected at $(grep -c C7519 $log) places (all compiles)"
done
