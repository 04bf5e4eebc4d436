#!/bin/bash
# (Next session, call A, jax 0.11.2) logreg_mgpu's first GPU run: check and time (2 warpgroups,
# else 1), beside the grid epoch kernel in one process; then check_kernels --only=logreg.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 170 python3 .device/lr_gpu.py > $OUT/lr_gpu.txt 2>&1; echo "lr rc $?"; grep -v "^W\|^I0" $OUT/lr_gpu.txt | tail -6
timeout 120 python3 -m experiments.check_kernels --only=logreg --seed=7 > $OUT/check_logreg.log 2>&1; echo "check rc $?"; grep -E "FAIL|passed|ok" $OUT/check_logreg.log | tail -6
timeout 200 python3 .device/lr_pop.py 8 64 132 > $OUT/lr_pop.txt 2>&1; echo "pop rc $?"; grep -v "^W\|^I0" $OUT/lr_pop.txt | tail -5
