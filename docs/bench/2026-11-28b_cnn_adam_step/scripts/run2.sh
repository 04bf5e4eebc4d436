#!/bin/bash
# After run.sh: the step checks with Adam's change bounded by xla's own distance (twice), and
# the float64 parity of seeds 1 and 2 (run.sh's 150 s took seed 0 only).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 150 python3 -m experiments.check_kernels --only=step > $OUT/check_step.log 2>&1; echo "check rc $?"
grep -E "^(ok|FAIL)|checks passed" $OUT/check_step.log | cut -c1-110
timeout 270 python3 -m experiments.parity --reference=float64 --seeds=1,2 --epochs=1 "--point=cnn adam" > $OUT/parity12.log 2>&1; echo "parity rc $?"
grep -v "^W1\|^I1" $OUT/parity12.log | tail -8
