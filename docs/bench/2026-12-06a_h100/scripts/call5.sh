# Call 5: where the 32-256-256-1 phase kernel's step goes on the H100 (Mosaic GPU's profiler),
# and the 32-256-1024-256-1 tile kernel's step without its products (its floor) on the H100.
set -u
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 -m probes.grid_regression --profile > $OUT/profile_grid_regression.txt 2>&1; tail -24 $OUT/profile_grid_regression.txt
timeout 300 python3 -m probes.grid_regression --kernel=tile_regression --floor > $OUT/floor_tile_regression.txt 2>&1; tail -5 $OUT/floor_tile_regression.txt
