#!/bin/bash
# registers.txt: ptxas' registers and spills of each PTX as dumped and with its hoisted wgmma
# descriptors rebuilt in the step's loop (sink_descriptors.py). From the checkout root, with
# ptxas (and its nvdisasm) in the folder $BIN (pip's nvidia-cuda-nvcc wheel has one).
set -u
export PYTHONPATH=.
here=docs/bench/2026-12-07_ptx
tmp=$(mktemp -d)
regs() { "$BIN/ptxas" -arch=sm_90a -O3 -v "$1" -o $tmp/k.cubin 2>&1 | grep -v "out of bound" \
  | grep -o "Used [0-9]* registers\|[0-9]* bytes spill stores, [0-9]* bytes spill loads" \
  | tr '\n' ';'; }
{
  echo "# $("$BIN/ptxas" --version | tail -1); -arch=sm_90a -O3 -v"
  for gz in docs/bench/2026-12-07_h100/gr_64.ptx.gz docs/bench/2026-12-06f_h100/call1/tile.ptx.gz \
      docs/bench/2026-11-29d_rolled_and_accumulators/1_stream/kernel.ptx.gz; do
    zcat $gz > $tmp/in.ptx
    echo "== $gz"
    echo "as dumped: $(regs $tmp/in.ptx)"
    echo "sunk: $(python3 $here/sink_descriptors.py $tmp/in.ptx $tmp/out.ptx) $(regs $tmp/out.ptx)"
  done
} > $here/registers.txt
rm -rf $tmp
cat $here/registers.txt
