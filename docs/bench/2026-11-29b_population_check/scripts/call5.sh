#!/bin/bash
# Session 2026-11-29b's fifth device call (checkout root, Hopper GPU, jax 0.11.2, logs under
# $OUT): where a warm run's wall goes. For each impl, the MLP reference once cold (filling a
# cache of its own), then once warm under cProfile (the profiler adds its cost), and the
# profile's largest cumulative entries.
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data
out=${OUT:-/tmp/out}
mkdir -p "$out"
for impl in pallas xla; do
  rm -rf /tmp/cw_$impl
  python3 -m experiments.mnist --impl=$impl --compilation_cache=/tmp/cw_$impl 2>&1 | grep "done:" \
    | sed "s/^/$impl cold: /" >> "$out/warm_profile.txt"
  s=$(date +%s.%N)
  python3 -m experiments.mnist --impl=$impl --compilation_cache=/tmp/cw_$impl 2>&1 | grep "done:" \
    | sed "s/^/$impl warm: /" >> "$out/warm_profile.txt"
  awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "  wall %.2f s\n", b - a}' >> "$out/warm_profile.txt"
  s=$(date +%s.%N)
  python3 -m cProfile -o "$out/warm_$impl.prof" -m experiments.mnist --impl=$impl \
    --compilation_cache=/tmp/cw_$impl 2>&1 | grep "done:" | sed "s/^/$impl warm, profiled: /" >> "$out/warm_profile.txt"
  awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "  wall %.2f s\n", b - a}' >> "$out/warm_profile.txt"
  python3 -c "
import pstats
p = pstats.Stats('$out/warm_$impl.prof')
p.sort_stats('cumulative').print_stats(45)" 2>&1 | sed -n '1,80p' > "$out/warm_${impl}_top.txt"
done
cat "$out/warm_profile.txt"
