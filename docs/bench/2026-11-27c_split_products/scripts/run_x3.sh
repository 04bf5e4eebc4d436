#!/bin/bash
# 3xTF32 tiles in the grid epoch kernel: the checks against float64, then the smaller points' probe.
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 330 python3 -m experiments.check_kernels --only=epoch > $OUT/check_epoch.log 2>&1; echo "check rc $?"
grep -iE "FAIL|passed|cases|3xTF32|hidden_block=(32|64)" $OUT/check_epoch.log | grep -v "^W" | tail -30
timeout 230 python3 .device/x3b.py 200 2>&1 | grep -v "^W\|^I0\|Warning" > $OUT/x3_small.txt; echo "probe rc $?"
cat $OUT/x3_small.txt
