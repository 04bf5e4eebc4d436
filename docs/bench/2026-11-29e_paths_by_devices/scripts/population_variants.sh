#!/bin/bash
# Populations of the MLP with one setting changed from the reference (784-256-10, batch 64, SGD,
# float32): xla against pallas' default path at 8 and 64 members on one GPU, 2 epochs, one
# process a variant. Settles whether any default pallas path is slower than xla (#55: "never
# one slower than xla"). Checkout root; MNIST under .data/data (carry .data).
# Usage: population_variants.sh VARIANT... (each a quoted set of flags)
set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=.data/data
out=${OUT:-/tmp/out}
mkdir -p "$out"
for flags in "$@"; do
  echo "== $flags" | tee -a "$out/variants.txt"
  # shellcheck disable=SC2086
  timeout 170 python3 -m benchmarks.population_bench --sizes=8,64 --impls=xla,pallas \
    --epochs=2 --dp_batch=0 $flags 2>&1 | grep -v "^WARNING\|^I0000\|^W0000" \
    | grep "population\|single\|rror" | tee -a "$out/variants.txt"
done
