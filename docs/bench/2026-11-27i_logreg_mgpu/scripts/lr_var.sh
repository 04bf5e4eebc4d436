#!/bin/bash
# logreg_mgpu's variants (lr_var.py), then populations with the fastest one (lr_pop.py 64 132).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 400 python3 .device/lr_var.py 2>&1 | grep -v "^W\|^I0" | tee $OUT/lr_var.txt
v=$(grep "fastest correct" $OUT/lr_var.txt | sed 's/.*"variant": "\([^"]*\)".*/\1/')
echo "populations with $v"
LR_VARIANT=$v timeout 150 python3 .device/lr_pop.py 64 132 2>&1 | grep -v "^W\|^I0" | tee $OUT/lr_pop.txt
