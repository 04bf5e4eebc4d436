#!/bin/bash
# jax 0.12.0.1 from carried wheels: the cluster kernel's checks and its epoch on the GPU.
cat /tmp/w12parts/part_* | (mkdir -p /tmp/w12 && cd /tmp/w12 && tar xf -) || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/w12/*.whl > /dev/null 2>&1 || { echo pip failed; exit 1; }
export PYTHONPATH=/tmp/site:. JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
python3 -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__, jax.devices())"
timeout 150 python3 -m experiments.check_kernels --only=cluster_mlp > $OUT/check012.log 2>&1; echo "check rc $?"; tail -9 $OUT/check012.log
sed -i 's/^for name, mod in (("old", old), ("new", new)):/for name, mod in (("new", new),):/' .device/time_single.py
timeout 100 python3 .device/time_single.py > $OUT/time012.log 2>&1; echo "time rc $?"; grep -v Warn $OUT/time012.log | tail -4
