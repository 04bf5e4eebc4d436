set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
python3 docs/bench/2026-12-06a_h100/scripts/early_dw1.py > $OUT/early_dw1.txt 2>&1; tail -12 $OUT/early_dw1.txt
timeout 200 python3 -m experiments.check_kernels --only=grid_regression > $OUT/check_grid_regression.txt 2>&1; tail -8 $OUT/check_grid_regression.txt
timeout 250 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false --alternatives "--points=regression hidden 256-256" --out_dir=$OUT/grid_256_256 > $OUT/grid_256_256.txt 2>&1; grep "^|" $OUT/grid_256_256/GRID.md
