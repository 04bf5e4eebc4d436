#!/bin/bash
# The next device call for the streamed population kernel (checkout root, Hopper GPU, logs
# under $OUT; about 3 minutes): its walks over W0 alone and its output layer alone, untimed
# by a profiler, at 8 and 64 members, against the whole kernel and XLA. Which of the two grows
# with the members says where its 186 us a step at 64 members go (the probe's walk of the
# same tiles: 38.9 us). Not yet run (written 2026-11-29, second session).
set -u
export PYTHONPATH=.
out=${OUT:-/tmp/out}
mkdir -p "$out"
run() { local name=$1 t=$2; shift 2; echo "== $*" | tee -a "$out/$name"; timeout "$t" python3 -m "$@" 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee -a "$out/$name"; }
run floor.txt 240 probes.stream_population --floor --members=8,64 --repeats=3
