#!/bin/bash
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 150 python3 .device/overhead.py > $OUT/overhead.txt 2>&1; echo "rc $?"; grep -v "^W\|^I0" $OUT/overhead.txt | tail -4
