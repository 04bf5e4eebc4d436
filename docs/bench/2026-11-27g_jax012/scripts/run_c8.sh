#!/bin/bash
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
PYTHONPATH=. timeout 150 python3 .device/wg_vs_lane.py > $OUT/wg_vs_lane_011.txt 2>&1; echo "011 rc $?"; grep -v "^W\|^I0" $OUT/wg_vs_lane_011.txt | tail -3
PYTHONPATH=/tmp/site:. timeout 200 python3 -m benchmarks.bench --grid --points="mlp reference" --seeds=0 --plots=false --out_dir=$OUT/grid012 > $OUT/grid012.log 2>&1; echo "grid012 rc $?"; grep "^| mlp" $OUT/grid012/GRID.md
PYTHONPATH=/tmp/site:. timeout 150 python3 -m experiments.check_kernels --seed=5 --only=cluster,cluster_mlp > $OUT/check012_cluster.log 2>&1; echo "check rc $?"; grep -E "FAIL|passed" $OUT/check012_cluster.log | tail -3
