#!/bin/bash
# Call 8: the MLP's cluster kernel with one traced step: same bits and times as before, then
# check_kernels --only=cluster_mlp (single network, population, several clusters).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 280 python3 .device/onestep.py > $OUT/onestep.txt 2>&1; echo "onestep rc $?"; grep -v "^W\|^I0" $OUT/onestep.txt | tail -4
timeout 250 python3 -m experiments.check_kernels --only=cluster_mlp --seed=21 > $OUT/check_cluster_mlp.log 2>&1; echo "check rc $?"
grep -E "FAIL|ok  |passed" $OUT/check_cluster_mlp.log | tail -14
