#!/bin/bash
# logreg_mgpu with its new defaults: check_kernels, precisions against the grid kernel, the
# grid point, populations, end to end (H100, jax 0.11.2).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 100 python3 -m experiments.check_kernels --only=logreg --seed=7 > $OUT/check_logreg.log 2>&1; echo "check rc $?"; grep -E "FAIL|passed" $OUT/check_logreg.log | tail -4
timeout 150 python3 .device/lr_prec.py 2>&1 | grep -v "^W\|^I0" | tee $OUT/lr_prec.txt
timeout 120 python3 -m benchmarks.bench --grid --seeds=0,1,2 --plots=false "--points=softmax regression" --out_dir=$OUT/grid > $OUT/grid.log 2>&1; echo "grid rc $?"; grep "softmax regression |" $OUT/grid/GRID.md
timeout 150 python3 -m benchmarks.population_bench --model=logreg --sizes=1,8,64,132,512 --impls=xla,pallas --epochs=2 --dp_batch=0 --out=$OUT/pop_logreg.json > $OUT/pop_logreg.log 2>&1; echo "pop rc $?"; grep -v "^W\|^I0" $OUT/pop_logreg.log | tail -14
