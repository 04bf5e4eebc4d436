"""The population step's TF32 error by emulation (numpy, any machine): the check's 784-wide case
(4 members, batch 64, 784-256-10) at N draws, every product's operands cut to TF32 (truncated,
or rounded to nearest), the rest in float64, against float64; each output's relative error.

  python docs/bench/2026-12-06e_h100/scripts/tf32_emulation.py 40
"""
import sys

import numpy as np

def tr(a, mode):
    a = np.asarray(a, np.float32)
    if mode == "f32": return a.astype(np.float64)
    b = a.view(np.uint32)
    if mode == "trunc": b = b & np.uint32(0xFFFFE000)
    else:  # round to nearest (ties away), as cvt.rna.tf32.f32
        b = (b + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return b.view(np.float32).astype(np.float64)
def rel(a, b): return np.linalg.norm((a - b).ravel()) / np.linalg.norm(b.ravel())
def step(w0, b0, w1, b1, x, y, lr, xn, mode):
    t = lambda a: tr(a, mode) if mode else np.asarray(a, np.float64)
    h = np.maximum(t(x) @ t(w0) + b0, 0)
    z = t(h) @ t(w1) + b1
    z = z - z.max(1, keepdims=True); p = np.exp(z); p /= p.sum(1, keepdims=True)
    rows = -np.log(p[np.arange(len(y)), y])
    dz = p.copy(); dz[np.arange(len(y)), y] -= 1; dz /= len(y)
    gw1 = t(h).T @ t(dz); gb1 = dz.sum(0)
    dh = (t(dz) @ t(w1).T) * (h > 0)
    gw0 = t(x).T @ t(dh); gb0 = dh.sum(0)
    w0n, b0n, w1n, b1n = w0 - lr * gw0, b0 - lr * gb0, w1 - lr * gw1, b1 - lr * gb1
    hn = np.maximum(t(xn) @ t(w0n) + b0n, 0)
    return w0n, b0n, w1n, b1n, hn, rows
names = ("w0", "b0", "w1", "b1", "h_next", "rows")
for mode in ("trunc", "rna"):
  worst = []
  for seed in range(int(sys.argv[1])):
    rng = np.random.default_rng(seed)
    m, b, k, n, c = 4, 64, 784, 256, 10
    W = [rng.standard_normal((m, k, n)) / np.sqrt(k), 0.1 * rng.standard_normal((m, n)),
         rng.standard_normal((m, n, c)) / np.sqrt(n), 0.1 * rng.standard_normal((m, c))]
    W = [w.astype(np.float32).astype(np.float64) for w in W]
    x, xn = rng.integers(0, 256, (2, m, b, k)).astype(np.uint8)
    y = rng.integers(0, c, (m, b)); lr = rng.uniform(0.05, 0.5, m).astype(np.float32)
    scale = np.float32(1 / 255)  # The pixels as the kernels scale them
    xs, xns = x.astype(np.float32) * scale, xn.astype(np.float32) * scale
    ref = [step(*(w[i] for w in W), x[i] / 255.0, y[i], float(lr[i]), xn[i] / 255.0, None)
           for i in range(m)]
    got = [step(*(w[i] for w in W), xs[i], y[i], float(lr[i]), xns[i], mode) for i in range(m)]
    errs = [rel(np.stack([o[j] for o in got]), np.stack([o[j] for o in ref])) for j in range(6)]
    worst.append(max(errs))
    if seed < 3:
      print(mode, seed, " ".join(f"{nm} {e:.1e}" for nm, e in zip(names, errs)))
  w = np.array(worst)
  print(mode, "worst output over draws: min %.2e median %.2e max %.2e, over 5e-3: %d of %d"
        % (w.min(), np.median(w), w.max(), (w > 5e-3).sum(), len(w)))
