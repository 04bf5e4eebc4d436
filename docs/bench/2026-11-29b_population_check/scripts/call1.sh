#!/bin/bash
# Session 2026-11-29b's first device call (checkout root, Hopper GPU, logs under $OUT): the
# streamed population kernel's first check and times, then the backends work's guard and notice
# (docs/bench/2026-11-29a_backends), then where a streamed tile's time goes.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)" >> "$out/device.txt" 2>&1
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 -m "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee -a "$out/$name"; }
run check.txt 150 experiments.check_kernels --only=stream_population
run stream_population.txt 150 probes.stream_population --members=8,64,128
run stream_population.txt 90 probes.stream_population --members=64 --shared
run guard.txt 120 experiments.check_kernels --only=logreg,cluster_mlp,grid_regression
run notice.txt 60 experiments.mnist --impl=pallas --model=cnn --epochs=1 --train_limit=6400
run weight_stream.txt 60 probes.weight_stream --ctas=64 --x=own --work=tensor
run weight_stream.txt 60 probes.weight_stream --ctas=64 --x=own --work=threads
run weight_stream.txt 60 probes.weight_stream --form=registers --ctas=64,128 --x=own
run profile.txt 60 probes.weight_stream --form=registers --profile --ctas=128 --x=own
