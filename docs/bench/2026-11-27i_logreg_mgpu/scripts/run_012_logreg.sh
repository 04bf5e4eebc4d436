#!/bin/bash
# jax 0.12.0.1 from carried wheels (README_012.txt): logreg_mgpu's checks, Lane against
# Warpgroup, beside the grid kernel; end to end of the MLP and softmax regression.
cat /tmp/w12parts/part_* | (mkdir -p /tmp/w12 && cd /tmp/w12 && tar xf -) || exit 1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site /tmp/w12/*.whl > /dev/null 2>&1 || { echo pip failed; exit 1; }
export PYTHONPATH=/tmp/site:. JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
python3 -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__, jax.devices())"
timeout 100 python3 -m experiments.check_kernels --only=logreg --seed=7 > $OUT/check012_logreg.log 2>&1; echo "check rc $?"; grep -E "FAIL|passed" $OUT/check012_logreg.log | tail -3
timeout 60 python3 .device/lr_prec.py sem 2>&1 | grep -v "^W\|^I0" | tee $OUT/sem012.txt
timeout 80 python3 .device/lr_prec.py float32 2>&1 | grep -v "^W\|^I0" | tee $OUT/prec012.txt
timeout 230 python3 -m benchmarks.end_to_end --workloads=mlp,logreg --out_dir=$OUT/e2e012 > $OUT/e2e012.log 2>&1; echo "e2e rc $?"; grep "^|" $OUT/e2e012/END_TO_END.md
