#!/bin/bash
# jax 0.11.2, H100: the rest of 2026-12-06e's pixel checks (split off jax0121.sh).
set -u
export PYTHONPATH=.
# The pixels' product on jax 0.11.2: the kernels that scale pixels (conv, population step,
# grid epoch kernel) against float64.
timeout 150 python3 -m experiments.check_kernels --seed=7 --only=conv,step,population,epoch \
  --epoch_cases=0:4 \
  > $OUT/check_pixels_0112.log 2>&1; echo "rc $?" >> $OUT/check_pixels_0112.log
grep -h "passed\|failed\|rc " $OUT/check_pixels_0112.log | tail -20
