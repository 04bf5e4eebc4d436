# Softmax regression's kernel with its mask loads' layouts given: the same bits and first-call
# times against the form before (logreg_given.py), then check_kernels --only=logreg.
set -u
export PYTHONPATH=.
timeout 100 python3 docs/bench/2026-12-06c_h100/logreg_given.py 2>&1 | grep -v -i warn
timeout 80 python3 -m experiments.check_kernels --only=logreg 2>&1 | grep -v -i warn | tail -12
