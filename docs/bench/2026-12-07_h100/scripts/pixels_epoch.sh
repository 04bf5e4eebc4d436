#!/bin/bash
# jax 0.11.2, H100: the grid epoch kernel's cases 2-3 against float64 after the pixels became a
# float32 product by 1/255 (2026-12-06d). No data; about 3 minutes.
set -u
export PYTHONPATH=.
timeout 200 python3 -u -m experiments.check_kernels --seed=7 --only=epoch --epoch_cases=2:4 \
  > $OUT/check_epoch_0112.log 2>&1; echo "rc $?" >> $OUT/check_epoch_0112.log
grep -h "^ok\|^FAIL\|passed\|failed\|rc " $OUT/check_epoch_0112.log | tail -12
