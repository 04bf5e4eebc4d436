#!/bin/bash
# jax 0.11.2: the PTX and step times of both regression phase kernels, for ptxas' report and the
# registers read here (issue #53); the kernels that scale pixels
# (a float32 product by 1/255 since 2026-12-06d) against float64.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
python3 -c "import jax; print(jax.__version__)" >> $OUT/gpu.txt
for k in tile_regression grid_regression; do
  MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=$OUT/ptx_$k timeout 150 python3 -m probes.grid_regression \
    --kernel=$k --repeats=3 > $OUT/probe_$k.log 2>&1
done
timeout 200 python3 -m experiments.check_kernels --seed=7 --only=conv,step,population,epoch \
  --epoch_cases=0:4 > $OUT/check_pixels_0112.log 2>&1; echo "rc $?" >> $OUT/check_pixels_0112.log
cat $OUT/gpu.txt; grep -h "Used\|spill\|us a step" $OUT/probe_*.log | head -12; ls $OUT/ptx_*
grep -h "passed\|failed\|FAIL\|rc " $OUT/check_pixels_0112.log | tail -12
