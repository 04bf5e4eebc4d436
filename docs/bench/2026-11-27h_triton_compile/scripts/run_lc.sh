#!/bin/bash
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 120 python3 .device/logreg_compile.py 2>&1 | grep -v "^W\|^I0" | tail -6
export JAXSHALLOW_COMPILATION_CACHE=/tmp/cc_empty_$$
timeout 150 python3 -m cProfile -o $OUT/logreg.prof -m experiments.mnist --model=logreg --impl=pallas --epochs=1 > $OUT/logreg_mnist.log 2>&1; echo "mnist rc $?"; grep -i "compil\|train\|s)" $OUT/logreg_mnist.log | tail -5
python3 -c "
import pstats; p = pstats.Stats('$OUT/logreg.prof'); p.sort_stats('cumulative').print_stats(30)" 2>&1 | grep -E "cumtime|^ +[0-9]" | head -34 | cut -c1-180
