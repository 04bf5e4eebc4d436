"""A numpy model of the tensor cores' float32 accumulation (each sum of 16 exact products and
the accumulator rounded toward zero) against float32's sequential sums: z = x W for 784 random
pixels (and b0's input 255) by He-initialised weights, over 4096 rows, three ways of adding
the split-bfloat16 products up. A model, not the hardware: it only orders the three ways."""
import numpy as np
rng = np.random.default_rng(0)
def bf16(a):  # round to nearest even bfloat16, as float32
  a = np.asarray(a, np.float32); u = a.view(np.uint32).astype(np.uint64)
  r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
  return r.view(np.float32)
def split3(w):
  hi = bf16(w); r = (w - hi).astype(np.float32); mid = bf16(r); lo = bf16((r - mid).astype(np.float32)); return hi, mid, lo
def rz32(a):  # float64 -> float32 toward zero
  f = a.astype(np.float32); over = np.abs(f.astype(np.float64)) > np.abs(a)
  f[over] = np.nextafter(f[over], np.float32(0)); return f
def tc_chain(blocks, acc=None):  # blocks: list of (n,16) product arrays in float64 (exact)
  acc = np.zeros(blocks[0].shape[0], np.float32) if acc is None else acc
  for b in blocks:
    acc = rz32(acc.astype(np.float64) + b.sum(1))
  return acc
n, K = 4096, 832
x = rng.integers(0, 256, (n, K)).astype(np.float32); x[:, 785:] = 0; x[:, 784] = 255
w = (rng.standard_normal((n, K)) * np.sqrt(2/784)).astype(np.float32)
exact = (x.astype(np.float64) * w.astype(np.float64)).sum(1)
# RN float32 sequential and 4-way (cuBLAS-like) sums
p32 = x * w
seq = np.zeros(n, np.float32)
for k in range(K): seq = (seq + p32[:, k]).astype(np.float32)
parts = split3(w)
prods = [(x.astype(np.float64) * p.astype(np.float64)) for p in parts]
one_chain = [pr[:, t*64 + 16*j: t*64 + 16*j + 16] for t in range(13) for pr in reversed(prods) for j in range(4)]
chain = tc_chain(one_chain)
per_tile = np.zeros(n, np.float32)
for t in range(13):
  acc = tc_chain([pr[:, t*64 + 16*j: t*64 + 16*j + 16] for pr in reversed(prods) for j in range(4)])
  per_tile = (per_tile + acc).astype(np.float32)
per_part = sum(tc_chain([pr[:, 16*j:16*j+16] for j in range(52)]).astype(np.float32) for pr in reversed(prods))
scale = np.abs(exact).mean()
for name, v in [("f32 RN sequential", seq), ("TC one chain (stream kernel)", chain), ("TC per tile + RN adds", per_tile), ("TC per part, parts added (cluster)", per_part)]:
  e = v.astype(np.float64) - exact
  print(f"{name:36s} mean |err|/mean|z| {np.abs(e).mean()/scale:.2e}  bias {e.mean()/scale:+.2e}  max {np.abs(e).max()/scale:.2e}")
