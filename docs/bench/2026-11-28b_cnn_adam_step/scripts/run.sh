#!/bin/bash
# The CNN's step kernels with Adam (sgd_parts' Adam update): the GPU checks, the grid's
# "cnn adam" point beside the op kernels (--alternatives), float64 parity over seeds 0-2.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 200 python3 -m experiments.check_kernels --only=step > $OUT/check_step.log 2>&1; echo "check rc $?"
grep -E "^(ok|FAIL)|checks passed" $OUT/check_step.log | cut -c1-100
timeout 200 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false --alternatives "--points=cnn adam" --out_dir=$OUT/grid > $OUT/grid.log 2>&1; echo "grid rc $?"
grep "^| cnn" $OUT/grid/GRID.md
timeout 150 python3 -m experiments.parity --reference=float64 --seeds=0,1,2 --epochs=1 "--point=cnn adam" > $OUT/parity.log 2>&1; echo "parity rc $?"
grep -v "^W1\|^I1" $OUT/parity.log | tail -8
