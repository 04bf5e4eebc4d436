#!/bin/bash
# Rowgroups landed: check_kernels' batch cases (128, 256 and 512 in two clusters, 512-unit at 128).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 540 python3 .device/batch_check.py > $OUT/check.log 2>&1; echo "check rc $?"
grep -E "ok  |FAIL|Error" $OUT/check.log | cut -c1-130
