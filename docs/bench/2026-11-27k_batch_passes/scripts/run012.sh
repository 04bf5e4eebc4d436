#!/bin/bash
# jax 0.12.0.1 from the carried wheels: the passes' checks and epoch times.
set -e
cat /tmp/w12/part_* > /tmp/w12.tar && mkdir -p /tmp/whl && tar xf /tmp/w12.tar -C /tmp/whl
pip install -q --no-deps --target /tmp/site /tmp/whl/*.whl 2>&1 | tail -2
set +e
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:.
python3 -c "import jax; print(jax.__version__, jax.devices())"
timeout 200 python3 .device/batch_check.py > $OUT/check012.log 2>&1; echo "check rc $?"
grep -E "ok  |FAIL|Error" $OUT/check012.log | cut -c1-120
timeout 150 python3 .device/batch_time.py float32 64,128,256 > $OUT/time012.txt 2>&1; echo "time rc $?"
grep -v "^W\|^I0" $OUT/time012.txt | tail -5
