#!/bin/bash
# jax 0.12.0.1 from carried wheels: the warm run's phases (#54) and the CNN and softmax
# regression end to end.
cat /tmp/w12parts/part_* | (mkdir -p /tmp/w12 && cd /tmp/w12 && tar xf -) || exit 1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site /tmp/w12/*.whl > /dev/null 2>&1 || { echo pip failed; exit 1; }
export PYTHONPATH=/tmp/site:. JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
python3 -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__, jax.devices())"
for v in xla lane; do
  rm -rf /tmp/cache_$v
  for run in cold warm warm; do
    echo -n "$run "; timeout 120 python3 .device/warm_probe.py $v /tmp/cache_$v 2>&1 | grep -v -i "warn\|compiling" | tail -1
  done
done
python3 -X importtime -c "import jax.experimental.pallas.mosaic_gpu" 2> $OUT/importtime_mgpu.txt
timeout 300 python3 -m benchmarks.end_to_end --workloads=cnn,logreg --out_dir=$OUT/e2e > $OUT/e2e.log 2>&1; echo "e2e rc $?"
tail -12 $OUT/e2e.log
