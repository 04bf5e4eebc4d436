#!/bin/bash
# One device call (2026-12-06f): the population TF32 bound and the tile kernel's PTX
# (population_tf32_and_tile_ptx.sh), ptxas' report of the 32-256-256-1 phase kernel
# (grid_regression_ptxas.sh), then the cold order (cold_order.sh). Carry [".data"].
set -u
bash docs/bench/next/population_tf32_and_tile_ptx.sh > $OUT/part1.txt 2>&1
timeout 120 bash docs/bench/next/grid_regression_ptxas.sh > /dev/null 2>&1
tail -5 $OUT/check_population.log; tail -12 $OUT/grid_regression_ptxas.txt
timeout 330 bash docs/bench/next/cold_order.sh > /dev/null 2>&1
cat $OUT/cold_order.txt
