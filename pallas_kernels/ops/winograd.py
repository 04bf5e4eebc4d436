"""Winograd's minimal filtering F(2x2, 3x3) for the kernels' 3x3 convolutions (Lavin and Gray,
"Fast Algorithms for Convolutional Neural Networks", 2016).

A 2 x 2 block of a 3x3 correlation's outputs, from the 4 x 4 input patch d under it and the
filter g, is

    Y = A^T [(G g G^T) * (B^T d B)] A

where * multiplies position by position. Here every entry is a tile: d[r][s] the patch's
(pixels, cin) input tile at offset (r, s), g[r][s] the (cin, cout) weights of tap (r, s), and *
a tile product. That is 16 products for the block instead of the direct form's 4 x 9; the
transforms are additions (and halvings of the weights), cheap beside the products, and round
differently from the direct sum (about as accurately: see docs/design/op_kernels.md).
"""

from __future__ import annotations

from pallas_kernels import common

BT = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
G = ((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1))
AT = ((1, 1, 1, 0), (0, 1, -1, -1))


def combine(coeffs, tiles):
  """sum(c * tile) over the nonzero coefficients, in order (+-1 as additions)."""
  out = None
  for c, t in zip(coeffs, tiles):
    if c:
      term = t if c == 1 else -t if c == -1 else t * c
      out = term if out is None else out + term
  return out


def transform(m, tiles):
  """m @ tiles @ m^T for a square 2-D list of tiles: each output a combination of inputs."""
  rows = [[combine(mj, row) for mj in m] for row in tiles]  # Each row of tiles times m^T.
  return [[combine(mi, [r[j] for r in rows]) for j in range(len(m))] for mi in m]


def outputs(d, g, precision):
  """The 2 x 2 block's output tiles, row-major ([Y00, Y01, Y10, Y11]), from the patch's input
  tiles, ``d(r, s)`` loading the one at offset (r, s), and the filter's tiles g (3 x 3). The
  whole of B^T d B and G g G^T first, then M a row of four products at a time, each row's share
  of A^T M A added in at once. (Transforming each tile just before its product, loading d's
  rows again where B^T takes them twice, made the CNN's float32 step slower.)"""
  u = transform(BT, [[d(r, s) for s in range(4)] for r in range(4)])
  v = transform(G, g)
  y = [None] * 4
  for xi in range(4):
    m = [common.dot(u[xi][nu], v[xi][nu], precision) for nu in range(4)]
    t = [combine(at, m) for at in AT]  # M's row xi times A.
    for k in range(4):  # Output (k // 2, k % 2) takes t[k % 2] times A^T[k // 2][xi].
      term = combine((AT[k // 2][xi],), (t[k % 2],))
      if term is not None:
        y[k] = term if y[k] is None else y[k] + term
  return y
