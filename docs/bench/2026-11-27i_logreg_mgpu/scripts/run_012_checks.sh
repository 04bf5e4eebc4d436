#!/bin/bash
# jax 0.12.0.1 from carried wheels: the check_kernels groups not yet run there (the epoch group's
# cases 5:18 in 4 processes, conv with max-pool and MSE) beside logreg and cluster_mlp.
cat /tmp/w12parts/part_* | (mkdir -p /tmp/w12 && cd /tmp/w12 && tar xf -) || exit 1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site /tmp/w12/*.whl > /dev/null 2>&1 || { echo pip failed; exit 1; }
export PYTHONPATH=/tmp/site:. JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
python3 -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__, jax.devices())"
for s in 5:8 8:11 11:14 14:18; do
  timeout 420 python3 -m experiments.check_kernels --seed=5 --only=epoch --epoch_cases=$s > $OUT/check012_epoch_${s/:/_}.log 2>&1 &
done
timeout 420 python3 -m experiments.check_kernels --seed=5 --only=conv > $OUT/check012_conv.log 2>&1 &
wait
for f in $OUT/check012_*.log; do echo "$(basename $f): $(grep -cE '^ok' $f) ok, $(grep -cE '^FAIL' $f) FAIL; $(grep -E 'passed' $f | tail -1)"; done
grep -h "^FAIL" $OUT/check012_*.log | head
