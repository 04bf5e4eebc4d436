# Settles: whether the 32-256-1024-256-1 tile kernel's products (44 us of its 79 us step on the
# H100) are held by the operands' fetches from L2 or by the tensor cores. Each CTA's product
# fetches six 16 KB halves of each operand's three bfloat16 parts (192 KB; 24.6 MB a product
# phase over 128 CTAs), against 12 wgmma of m64 n64 k128 (about 1.7 us at the H100's dense
# bfloat16 rate). If fetching one part of three takes most of the 44 us away, the next form
# fetches float32 once and splits it in the CTA (A from registers), or shares operands by
# multicast within clusters; if not, wider and fewer wgmma. Checkout root, Hopper GPU; about 3
# minutes (five kernels compiled).
set -u
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 400 python3 -m probes.grid_regression --kernel=tile_regression --floor --fetches 2>&1 \
  | grep -v Warning | tee $OUT/tile_fetches.txt
