#!/bin/bash
# Call 5: the regression net's small set, where its call goes; the float64 parity at the
# regression net 32-1024-1 (two clusters) and at 784-1792-10 (7 clusters).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 120 python3 .device/reg_small.py > $OUT/reg_small.txt 2>&1; echo "small rc $?"; grep -v "^W\|^I0" $OUT/reg_small.txt | tail -6
timeout 150 python3 -m experiments.parity --reference=float64 --seeds=0,1,2 --epochs=5 "--point=regression hidden 1024" > $OUT/parity_regression_hidden_1024.log 2>&1; echo "parity rc $?"; grep -v "^W\|^I0" $OUT/parity_regression_hidden_1024.log | tail -4
