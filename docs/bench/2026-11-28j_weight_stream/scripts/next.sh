#!/bin/bash
# The next device call for the population work (run from the checkout's root on a Hopper GPU;
# logs under $OUT): where a streamed tile's time goes, the streamed population kernel's first
# check, then its times beside XLA's. Not yet run (written 2026-11-28 late).
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1; shift; echo "== $*" | tee -a "$out/$name"; timeout 150 python3 -m "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee -a "$out/$name"; }
run weight_stream.txt probes.weight_stream --ctas=64 --x=own --work=tensor
run weight_stream.txt probes.weight_stream --ctas=64 --x=own --work=threads
run weight_stream.txt probes.weight_stream --form=registers --ctas=64,128 --x=own
run weight_stream.txt probes.weight_stream --form=registers --warpgroups=1 --ctas=128 --x=own
run profile.txt probes.weight_stream --profile --ctas=64 --x=own
run profile.txt probes.weight_stream --form=registers --profile --ctas=128 --x=own
run check.txt experiments.check_kernels --only=stream_population
run stream_population.txt probes.stream_population --members=8,64,128
run stream_population.txt probes.stream_population --members=64 --shared
