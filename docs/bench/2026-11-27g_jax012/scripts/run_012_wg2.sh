#!/bin/bash
export PYTHONPATH=/tmp/site:. JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
python3 -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__, jax.devices())"
timeout 200 python3 .device/wg012.py > $OUT/wg012.txt 2>&1; echo "times rc $?"; grep -v "^W\|^I0" $OUT/wg012.txt | tail -3
timeout 250 python3 .device/wg012.py check > $OUT/check012_wg.log 2>&1; echo "check rc $?"; grep -E "FAIL|passed" $OUT/check012_wg.log | tail -4
