"""Check every Pallas kernel (and, on a GPU with jax-triton, every Triton kernel), compiled for
this backend, against float64 references.

  python -m experiments.check_kernels            # on a GPU: the real Triton kernels

Fresh random inputs each run; shapes that are and are not multiples of the blocks; forward and
all gradients; every precision mode against its documented tolerance. Exits non-zero on a miss.
"""

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from absl import flags

from experiments import guard_flags
from jaxshallow import backends, cnn, mlp, models, ops, synthetic, train
from jaxshallow.fused import epoch as fused_epoch, step as fused_step
from jaxshallow.reference import numpy_cnn, numpy_mlp
from jaxshallow.run import cli, config
from pallas_kernels.fused import (cluster_epoch_mgpu, cluster_mlp_mgpu, conv_batch,
                                  grid_regression_mgpu, logreg_mgpu, mlp_epoch, population_step,
                                  sgd_parts, stream_population_mgpu, tile_mlp_mgpu,
                                  tile_regression_mgpu)
from pallas_kernels import common
from pallas_kernels.ops import (conv, conv_pool, conv_stack, dense, dense_xent, dense_mgpu,
                                max_pool, mse, softmax_xent)

_SEED = flags.DEFINE_integer("seed", None, "Seed of the random inputs (default: a fresh one, "
                             "printed, so that a failure can be rerun on the same inputs).")
_ONLY = flags.DEFINE_list("only", ["dense", "hopper", "xent", "head", "conv", "step", "epoch",
                                   "cluster", "cluster_mlp", "grid_regression",
                                   "tile_regression", "tile_mlp", "stream_population", "logreg",
                                   "barrier", "population", "triton"],
                          "Which groups: dense, hopper (the tf32 products of large batches on "
                          "Hopper GPUs; GPU only), xent, head (the fused output layer), conv (with "
                          "max-pool, the fused conv+pool and MSE), step (the CNN's step "
                          "kernels: the batch's convolution, the update, a whole step), epoch "
                          "(the whole-epoch kernel), cluster (the regression net's epoch in one "
                          "cluster; Hopper only), cluster_mlp (the MLP's epoch in one cluster; "
                          "Hopper only), grid_regression (the regression net 32-256-256-1's "
                          "epoch over 64 CTAs; Hopper only), tile_regression (32-256-1024-256-1's "
                          "over 128 CTAs; Hopper only), tile_mlp (the MLP "
                          "784-256-1024-256-10's over 132 CTAs; Hopper only), "
                          "stream_population (a population of MLPs, weights streamed from "
                          "global memory; Hopper only), "
                          "logreg (softmax regression's epoch in one CTA; Hopper, "
                          "or Mosaic GPU's interpreter), barrier (its grid barrier under stress; "
                          "GPU only), "
                          "population (the population step kernels), triton (the Triton twins "
                          "of dense and xent; GPU and jax-triton only).")
_BARRIER_ROUNDS = flags.DEFINE_integer("barrier_rounds", 5000, "Rounds of the barrier stress.")
_EPOCH_CASES = flags.DEFINE_string("epoch_cases", ":", "The epoch group's cases FROM:TO (a slice "
                                   "of its list, e.g. 0:6): they compile about 20 s each on the "
                                   "H100, so a run can be split over processes.")

# Relative Frobenius-norm error allowed against float64, per precision mode.
TOLERANCE = {"float32": 1e-5, "tf32": 5e-3, "bfloat16": 2e-2}
DENSE_SHAPES = [(1, 784, 256), (37, 100, 10), (64, 784, 256), (64, 33, 1000), (1000, 100, 10),
                (1000, 784, 1000), (64, 256, 10), (8192, 784, 256), (4100, 785, 130),
                (4104, 784, 264)]
BLOCKS = [None, (("block_m", 16), ("block_n", 16), ("block_k", 16)),
          (("block_m", 128), ("block_n", 128), ("block_k", 32))]
XENT_SHAPES = [(1, 10), (37, 10), (64, 3), (1000, 10), (64, 1000), (8192, 10)]
CONV_SHAPES = [(1, 28, 1, 16), (3, 28, 1, 16), (64, 28, 1, 16), (64, 26, 16, 32), (3, 26, 16, 32),
               (3, 11, 5, 7), (256, 26, 16, 32)]
# (n, h, c0, c1, c2): the CNN's two convolutions at batch 1 and 64, odd sizes, 3 input channels.
CONV_STACK_SHAPES = [(1, 28, 1, 16, 32), (64, 28, 1, 16, 32), (3, 13, 1, 5, 7), (2, 12, 3, 6, 2)]
CONV_BLOCKS = [None, (("block_p", 32), ("splits", 8), ("dw_taps", 2)),
               (("block_p", 128), ("splits", 16), ("dw_taps", 9))]


def rel_err(a, b):
  a = np.asarray(a, np.float64)
  if not np.all(np.isfinite(a)):
    return np.inf
  return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def dense_inputs(rng, m, k, n):
  """x, w, b and dy of a dense layer, float32, fresh from ``rng``."""
  return (rng.standard_normal((m, k), np.float32),
          (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32),
          rng.standard_normal(n).astype(np.float32), rng.standard_normal((m, n), np.float32))


def dense_error(op, x, w, b, dy, w_transposed=False):
  """The largest relative error of relu(x w + b) = op(x, w, b) and its three gradients against
  float64; ``w_transposed``: op takes W as (N, K) and gives dW as (N, K)."""
  x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
  fn = jax.jit(lambda x, w, b, dy: (op(x, w, b), *jax.vjp(op, x, w, b)[1](dy)))
  got = list(fn(x, np.ascontiguousarray(w.T) if w_transposed else w, b, dy))
  if w_transposed:
    got[2] = np.asarray(got[2]).T
  # The mask of the kernel's own output: in reduced precision a z near 0 may flip sign, which
  # is rounding, not a backward bug. The forward is checked against exact z.
  g = dy * (np.asarray(got[0]) > 0)
  ref = [np.maximum(x64 @ w64 + b64, 0), g @ w64.T, x64.T @ g, g.sum(0)]
  return max(rel_err(a, r) for a, r in zip(got, ref))


def dense_cases(rng, interpret):
  for m, k, n in DENSE_SHAPES:
    for blocks in BLOCKS:
      for precision in TOLERANCE:
        inputs = dense_inputs(rng, m, k, n)
        name = "x".join(str(v) for _, v in blocks) if blocks else "default"
        # W as stored (K, N), and pre-transposed (N, K), where dw comes back as (N, K). The
        # layer as the op runs it: on Hopper tiles where jaxshallow.ops takes them.
        for w_t in (False, True):
          hopper = ops.dense_on_hopper(m, k, n, precision, blocks, w_t, interpret)
          op = lambda x, w, b: dense.dense(x, w, b, relu=True, precision=precision,
                                           blocks=blocks, interpret=interpret,
                                           w_transposed=w_t, hopper=hopper)
          layout = " W(N,K)" if w_t else ""
          yield (f"dense+relu m={m} k={k} n={n} blocks={name}{layout}", precision,
                 dense_error(op, *inputs, w_transposed=w_t))


def xent_error(op, z, labels):
  """The largest relative error of op(z, labels) = (mean loss, correct count) and d loss / dz
  against float64; infinite if the count of correct predictions is off."""
  m = z.shape[0]
  (loss, correct), dz = jax.jit(jax.value_and_grad(lambda z: op(z, labels), has_aux=True))(z)
  z64 = z.astype(np.float64)
  zmax = z64.max(1, keepdims=True)
  logp = z64 - zmax - np.log(np.exp(z64 - zmax).sum(1, keepdims=True))
  ref_dz = np.exp(logp)
  ref_dz[np.arange(m), labels] -= 1
  if int(correct) != int(np.sum(z.argmax(1) == labels)):
    return np.inf
  return max(rel_err(loss, -logp[np.arange(m), labels].mean()), rel_err(dz, ref_dz / m))


def xent_inputs(rng, m, c, scale):
  return ((scale * rng.standard_normal((m, c))).astype(np.float32),
          rng.integers(0, c, m).astype(np.int32))


def xent_cases(rng, interpret):
  op = lambda z, labels: softmax_xent.softmax_cross_entropy(z, labels, interpret=interpret)
  for m, c in XENT_SHAPES:
    for scale in (3.0, 1e4):
      yield (f"softmax_xent m={m} c={c} |z|~{scale:g}", "float32",
             xent_error(op, *xent_inputs(rng, m, c, scale)))


def triton_cases(rng, interpret):
  """The Triton twins of the dense and softmax cross-entropy kernels (GPU only, with
  jax-triton: Triton has no CPU form)."""
  del interpret
  import triton_kernels
  if why := triton_kernels.unavailable():
    print(f"notice: the Triton kernels are not checked here: they need {why}")
    return
  from triton_kernels import dense as t_dense, softmax_xent as t_xent
  for m, k, n in DENSE_SHAPES:
    for precision in TOLERANCE:
      op = lambda x, w, b: t_dense.dense(x, w, b, relu=True, precision=precision)
      yield (f"triton dense+relu m={m} k={k} n={n}", precision,
             dense_error(op, *dense_inputs(rng, m, k, n)))
  for m, c in XENT_SHAPES:
    for scale in (3.0, 1e4):
      yield (f"triton softmax_xent m={m} c={c} |z|~{scale:g}", "float32",
             xent_error(t_xent.softmax_cross_entropy, *xent_inputs(rng, m, c, scale)))


def head_cases(rng, interpret):
  """The fused output layer: loss, count and every gradient against float64 NumPy."""
  for m, k, n in [(64, 256, 10), (1, 784, 10), (37, 100, 3), (1000, 33, 10), (130, 4608, 10),
                  (8192, 256, 10), (64, 256, 100)]:
    for precision in TOLERANCE:
      h = np.maximum(rng.standard_normal((m, k)), 0).astype(np.float32)
      w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
      b = (0.1 * rng.standard_normal(n)).astype(np.float32)
      labels = rng.integers(0, n, m).astype(np.int32)
      fn = jax.jit(jax.value_and_grad(
          lambda h, w, b: dense_xent.dense_softmax_cross_entropy(
              h, w, b, labels, precision=precision, interpret=interpret),
          argnums=(0, 1, 2), has_aux=True))
      (loss, correct), grads = fn(h, w, b)
      h64, w64 = h.astype(np.float64), w.astype(np.float64)
      z = h64 @ w64 + b
      zmax = z.max(1, keepdims=True)
      logp = z - zmax - np.log(np.exp(z - zmax).sum(1, keepdims=True))
      dz = np.exp(logp)
      dz[np.arange(m), labels] -= 1
      dz /= m
      ref = [dz @ w64.T, h64.T @ dz, dz.sum(0)]
      err = max(rel_err(loss, -logp[np.arange(m), labels].mean()),
                *(rel_err(g, r) for g, r in zip(grads, ref)))
      if precision == "float32" and int(correct) != int(np.sum(z.argmax(1) == labels)):
        err = np.inf
      yield f"dense+softmax_xent m={m} k={k} n={n}", precision, err


CONV_POOL_SHAPES = [(64, 26, 16, 32), (3, 26, 16, 32), (3, 11, 5, 7), (256, 26, 16, 32),
                    (2, 9, 1, 16)]


def conv_pool_error(rng, n, h, cin, cout, precision, interpret):
  """The fused conv+ReLU+pool's output and gradients against float64. The backward follows the
  kernel's own choice of window position (as the conv's ReLU mask does for conv+relu): where two
  positions are within rounding of each other the reduced precisions may choose either."""
  x = rng.standard_normal((n, h, h, cin), np.float32)
  w = (rng.standard_normal((3, 3, cin, cout)) / np.sqrt(9 * cin)).astype(np.float32)
  b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
  p = (h - 2) // 2
  dy = rng.standard_normal((n, p, p, cout), np.float32)
  op = lambda x, w, b: conv_pool.conv_relu_pool(x, w, b, precision=precision,
                                                       interpret=interpret)
  y, grads = jax.jit(lambda *a: (op(*a[:3]), jax.vjp(op, *a[:3])[1](a[3])))(x, w, b, dy)
  fwd, bwd = conv_pool._config(precision, None)
  arg = np.asarray(conv_pool.conv_relu_pool_fwd(x, w, b, precision=precision, wide=bwd["wide"],
                                                interpret=interpret, **fwd)[1])
  arg = arg.reshape(n, p, p, cout)
  x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
  z64, cols = numpy_cnn.conv_relu(x64, w64, b64)
  y64, _ = numpy_cnn.max_pool(z64.reshape(n, h - 2, h - 2, cout))
  # The pooled gradient at the kernel's chosen positions; none where it chose -1.
  chosen = np.where(arg >= 0, dy.astype(np.float64), 0.0)
  g = numpy_cnn.max_pool_backward(chosen, np.maximum(arg, 0), (n, h - 2, h - 2, cout))
  ref = numpy_cnn.conv_relu_backward(g.reshape(z64.shape), np.ones(z64.shape), cols, w64,
                                     x.shape)
  return max(rel_err(y, y64.reshape(y.shape)), *(rel_err(a, r) for a, r in zip(grads, ref)))


def conv_stack_error(rng, n, h, c0, c1, c2, precision, interpret):
  """conv + ReLU, conv + ReLU + pool (the lower dw from inside the upper dx kernel) against
  float64, following the kernels' own ReLU mask and window choices, as conv_pool_error does."""
  x = rng.standard_normal((n, h, h, c0), np.float32)
  w1 = (rng.standard_normal((3, 3, c0, c1)) / np.sqrt(9 * c0)).astype(np.float32)
  b1 = (0.1 * rng.standard_normal(c1)).astype(np.float32)
  w2 = (rng.standard_normal((3, 3, c1, c2)) / np.sqrt(9 * c1)).astype(np.float32)
  b2 = (0.1 * rng.standard_normal(c2)).astype(np.float32)
  p = (h - 4) // 2
  dy = rng.standard_normal((n, p, p, c2), np.float32)
  op = lambda *a: conv_stack.conv_stack(*a, precision=precision, interpret=interpret)
  y, grads = jax.jit(lambda *a: (op(*a[:5]), jax.vjp(op, *a[:5])[1](a[5])))(
      x, w1, b1, w2, b2, dy)
  _, (_, y1, _, arg) = conv_stack._vjp_fwd(x, w1, b1, w2, b2, precision, None, interpret)
  mask, arg = np.asarray(y1) > 0, np.asarray(arg).reshape(n, p, p, c2)
  chosen = np.where(arg >= 0, dy.astype(np.float64), 0.0)
  g2 = numpy_cnn.max_pool_backward(chosen, np.maximum(arg, 0), (n, h - 4, h - 4, c2))
  conv64 = lambda a, w: jax.lax.conv_general_dilated(
      a, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
  with jax.enable_x64(True), jax.default_device(jax.devices("cpu")[0]):
    def pre2(w1, b1, w2, b2):  # The upper pre-activation, through the kernel's lower mask.
      a1 = jnp.where(mask, conv64(jnp.asarray(x, jnp.float64), w1) + b1, 0.0)
      return conv64(a1, w2) + b2
    args64 = [jnp.asarray(a, jnp.float64) for a in (w1, b1, w2, b2)]
    z2, vjp = jax.vjp(pre2, *args64)
    ref = [np.asarray(r) for r in vjp(jnp.asarray(g2))]
    y64, _ = numpy_cnn.max_pool(np.maximum(np.asarray(z2), 0.0))
  errs = [rel_err(y, y64.reshape(y.shape)), *(rel_err(a, r) for a, r in zip(grads[1:], ref))]
  if np.any(np.asarray(grads[0])):
    errs.append(np.inf)  # x is data: its cotangent must be zero.
  return max(errs)


def conv_cases(rng, interpret):
  """conv+ReLU and max-pool, forward and gradients, against the NumPy im2col reference."""
  for n, h, cin, cout in CONV_SHAPES:
    for blocks in CONV_BLOCKS:
      for precision in TOLERANCE:
        x = rng.standard_normal((n, h, h, cin), np.float32)
        w = (rng.standard_normal((3, 3, cin, cout)) / np.sqrt(9 * cin)).astype(np.float32)
        b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
        dy = rng.standard_normal((n, h - 2, h - 2, cout), np.float32)
        op = lambda x, w, b: conv.conv_relu(x, w, b, precision=precision, blocks=blocks,
                                                  interpret=interpret)
        y, grads = jax.jit(lambda *a: (op(*a[:3]), jax.vjp(op, *a[:3])[1](a[3])))(x, w, b, dy)
        x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
        y64, cols = numpy_cnn.conv_relu(x64, w64, b64)
        z_ok = np.asarray(y).reshape(y64.shape) > 0  # The kernel's own ReLU mask, as for dense.
        ref = numpy_cnn.conv_relu_backward(dy.astype(np.float64), z_ok.astype(np.float64), cols,
                                           w64, x.shape)
        err = max(rel_err(y, y64.reshape(y.shape)), *(rel_err(g, r) for g, r in zip(grads, ref)))
        name = "x".join(str(v) for _, v in blocks) if blocks else "default"
        yield f"conv+relu n={n} h={h} cin={cin} cout={cout} blocks={name}", precision, err
  for n, h, cin, cout in CONV_POOL_SHAPES:
    for precision in TOLERANCE:
      yield (f"conv+relu+pool n={n} h={h} cin={cin} cout={cout}", precision,
             conv_pool_error(rng, n, h, cin, cout, precision, interpret))
  for n, h, c0, c1, c2 in CONV_STACK_SHAPES:
    for precision in TOLERANCE:
      yield (f"conv stack n={n} h={h} c={c0},{c1},{c2}", precision,
             conv_stack_error(rng, n, h, c0, c1, c2, precision, interpret))
  for n, h, c in [(1, 24, 32), (64, 24, 32), (3, 7, 5), (256, 24, 32)]:
    x = rng.standard_normal((n, h, h, c), np.float32)
    dy = rng.standard_normal((n, h // 2, h // 2, c), np.float32)
    y, vjp = jax.vjp(lambda x: max_pool.max_pool(x, interpret=interpret), x)
    ref_y, arg = numpy_cnn.max_pool(x.astype(np.float64))
    ref_dx = numpy_cnn.max_pool_backward(dy.astype(np.float64), arg, x.shape)
    yield f"max_pool n={n} h={h} c={c}", "float32", max(rel_err(y, ref_y),
                                                           rel_err(vjp(dy)[0], ref_dx))
  for n in (1, 256, 25600):
    p, t = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    loss, grad = jax.value_and_grad(lambda p: mse.mse(p, t, interpret=interpret))(p)
    d = p.astype(np.float64) - t
    yield f"mse n={n}", "float32", max(rel_err(loss, np.mean(d * d)), rel_err(grad, 2 * d / n))


# (n, side, cin, cout, batch): the CNN's first convolution at its batch, odd sizes and channels.
BATCH_CONV_SHAPES = [(600, 28, 1, 16, 64), (50, 11, 3, 5, 3), (10, 28, 1, 16, 1)]
# Per parameter: (dims, padded, partials): the CNN's six at batch 64, and odd ones.
SGD_PARTS_SHAPES = [((9, 1, 16), (16, 1, 16), 704), ((16,), (16,), 704), ((9, 16, 32), None, 128),
                    ((32,), None, 128), ((4608, 10), (4608, 16), 2), ((10,), (16,), 2),
                    ((9, 5, 7), (9, 8, 8), 13), ((3,), None, 1)]


def step_cases(rng, interpret):
  """The CNN's step kernels (``fusion="step"``): the batch's convolution and the update against
  float64, then one whole step against XLA's float64 step (the parameters' change)."""
  for n, side, cin, cout, batch in BATCH_CONV_SHAPES:
    images = rng.integers(0, 256, (n, side, side, cin), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    order = rng.permutation(n).astype(np.int32)
    w = (rng.standard_normal((3, 3, cin, cout)) / np.sqrt(9 * cin)).astype(np.float32)
    b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    step = (n // batch) - 1
    rows = order[step * batch:(step + 1) * batch]
    x64 = images[rows].astype(np.float64) / 255
    y64, _ = numpy_cnn.conv_relu(x64, w.astype(np.float64), b.astype(np.float64))
    for precision in TOLERANCE:
      cfg = conv.config(precision)
      y, x, y_labels = jax.jit(functools.partial(
          conv_batch.batch_conv, batch=batch, precision=precision, block_p=cfg["fwd_p"],
          num_warps=cfg["fwd_warps"], interpret=interpret))(images, labels, order, step, w, b)
      err = max(rel_err(y, y64.reshape(y.shape)), rel_err(x, x64),
                float(np.any(np.asarray(y_labels) != labels[rows])))
      yield f"batch conv n={n} h={side} cin={cin} cout={cout} batch={batch}", precision, err
  for n, side, cin, cout, classes in ((3, 9, 5, 7, 10), (64, 26, 16, 32, 10)):
    x = rng.random((n, side, side, cin), np.float32)
    w = (rng.standard_normal((3, 3, cin, cout)) / np.sqrt(9 * cin)).astype(np.float32)
    b = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    hw = rng.standard_normal((((side - 2) // 2) ** 2 * cout, classes)).astype(np.float32)
    for precision in TOLERANCE:
      y, _, parts = jax.jit(functools.partial(
          conv_pool.forward, precision=precision, blocks=None, interpret=interpret))(
              x, w, b, head_w=hw)
      logits = np.asarray(parts, np.float64).reshape(-1, n, parts.shape[1]).sum(0)
      want = np.asarray(y, np.float64).reshape(n, -1) @ hw.astype(np.float64)
      yield (f"conv+pool's partial logits n={n} h={side} cin={cin} cout={cout}", precision,
             rel_err(logits[:, :classes], want))
  layouts = [sgd_parts.layout(d, p) for d, p, _ in SGD_PARTS_SHAPES]
  parts = [rng.standard_normal((k, lay.size), np.float32)
           for (_, _, k), lay in zip(SGD_PARTS_SHAPES, layouts)]
  params = [rng.standard_normal(d, np.float32) for d, _, _ in SGD_PARTS_SHAPES]
  vels = [rng.standard_normal(d, np.float32) for d, _, _ in SGD_PARTS_SHAPES]
  f64 = lambda arrays: [a.astype(np.float64) for a in arrays]
  for momentum in (True, False):
    v = vels if momentum else None
    ref_p, ref_v = sgd_parts.reference(f64(parts), f64(params), v and f64(v), 0.1, 0.9,
                                                 layouts)
    got_p, got_v, losses, correct = jax.jit(lambda a, p, v: sgd_parts.sgd_parts(
        a, p, v, layouts, 0.1, 0.9, jnp.arange(5.0), jnp.arange(5), 1, jnp.zeros(3),
        jnp.zeros(3, jnp.int32), interpret=interpret))(parts, params, v)
    err = max(rel_err(a, b) for a, b in zip(got_p + (got_v or []), ref_p + (ref_v or [])))
    err = max(err, rel_err(losses, [0, 2, 0]), rel_err(correct, [0, 10, 0]))
    yield f"sgd_parts {'momentum' if momentum else 'plain'}", "float32", err
  # Adam: its moments (nu >= 0) and the bias corrections at the step's place (step 1, count 6)
  moments = (vels, [np.abs(v) for v in vels])
  corrections = common.adam_corrections(6, 3)
  factors = tuple(np.float64(corrections[k]) for k in (2, 3))
  ref_p, ref_m = sgd_parts.reference(f64(parts), f64(params), None, 1e-3, 0.9, layouts,
                                     tuple(map(f64, moments)), factors)
  got_p, got_m, _, _ = jax.jit(lambda a, p, m: sgd_parts.sgd_parts(
      a, p, None, layouts, 1e-3, 0.9, jnp.arange(5.0), jnp.arange(5), 1, jnp.zeros(3),
      jnp.zeros(3, jnp.int32), moments=m, corrections=corrections, interpret=interpret))(
          parts, params, moments)
  yield "sgd_parts adam", "float32", max(
      rel_err(a, b) for a, b in zip(got_p + got_m[0] + got_m[1], ref_p + ref_m[0] + ref_m[1]))
  # One step, 28 x 28 images at batch 64, from the same params: the change of every parameter,
  # with momentum (a random trace) and with Adam (random moments, count 3).
  images = rng.integers(0, 256, (64, 28, 28, 1), dtype=np.uint8)
  labels = rng.integers(0, 10, 64).astype(np.uint8)
  order = rng.permutation(64).astype(np.int32)
  params = cnn.init_cnn(jax.random.key(int(rng.integers(1 << 30))))
  normal = lambda: jax.tree.map(lambda a: jnp.asarray(rng.standard_normal(a.shape), a.dtype),
                                params)
  # Moments of the gradients' size, so that the step's gradient counts in Adam's change
  mu = jax.tree.map(lambda a: 0.01 * a, normal())
  nu = jax.tree.map(lambda a: 1e-4 * jnp.abs(a), normal())
  for name, lr, slots in (("momentum", 0.02, normal()), ("adam", 1e-3, (mu, nu))):
    tx = train.make_optimizer(name, lr)
    with jax.enable_x64(True):
      to64 = lambda tree: jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), tree)
      p64, state64 = to64(params), tx.init(to64(params))
      if name == "momentum":  # optax's momentum trace
        state64 = optax.tree_utils.tree_set(state64, trace=to64(slots))
      else:
        state64 = optax.tree_utils.tree_set(state64, mu=to64(mu), nu=to64(nu),
                                            count=jnp.asarray(3, jnp.int32))
      (ref, _, _) = jax.jit(train.train_step, static_argnames=train.STATIC)(
          p64, state64, (images[order] / 255.0, labels[order]), tx=tx, model=models.CNN)
      ref_change = [np.asarray(r) - np.asarray(p) for r, p in zip(jax.tree.leaves(ref),
                                                                  jax.tree.leaves(p64))]
    corrections = common.adam_corrections(3, 1) if name == "adam" else None
    error = lambda got: max(rel_err(np.asarray(g, np.float64) - np.asarray(p), r) for g, p, r in
                            zip(jax.tree.leaves(got), jax.tree.leaves(params), ref_change))
    # Adam's update is float32 arithmetic in every precision: float32 and tf32 check it. (In
    # bfloat16 the step's gradients pass through it at 2.2e-2 against xla's 9e-3 on the H100,
    # 2026-11-28: the step kernels round other operands to bfloat16 than xla does; the momentum
    # case checks the step's bfloat16 arithmetic.)
    for precision in TOLERANCE if name == "momentum" else ("float32", "tf32"):
      got, _, _, _ = jax.jit(functools.partial(
          fused_step.cnn_step, batch=64, lr=tx.lr, momentum=tx.momentum, precision=precision,
          interpret=interpret))(params, slots, images, labels, order, 0, jnp.zeros(1),
                                jnp.zeros(1, jnp.int32), corrections=corrections)
      if name == "momentum":  # The random trace dominates the change: the tolerance
        yield f"cnn step, {name} (every parameter's change)", precision, error(got)
        continue
      # Adam's m / sqrt(v) passes on each element's relative error of its gradient, large where
      # a gradient is small: bounded by xla's own distance in this precision, twice, as the
      # epoch cases are (and at least the tolerance).
      state32 = jax.tree.map(lambda a: a if a.dtype == jnp.int32 else a.astype(jnp.float32),
                             state64)
      (xla, _, _) = jax.jit(train.train_step, static_argnames=train.STATIC)(
          params, state32, (train.to_float(jnp.asarray(images[order])), labels[order]),
          tx=tx, precision=precision, model=models.CNN)
      xla_err = error(xla)
      yield (f"cnn step, {name} (every parameter's change; xla {xla_err:.0e})", precision,
             error(got), max(TOLERANCE[precision], 2 * xla_err))


# (widths, batch, optimizer): every MLP-family shape of the project, odd sizes, batch 1 and 37.
EPOCH_CASES = [((784, 256, 10), 64, "sgd"), ((784, 10), 64, "sgd"),
               ((784, 512, 256, 10), 64, "sgd"), ((784, 256, 10), 1, "sgd"),
               ((33, 40, 17, 3), 37, "momentum"), ((784, 256, 10), 256, "momentum"),
               ((32, 256, 1), 256, "sgd"),
               ((32, 1024, 1), 256, "sgd"), ((32, 256, 1024, 256, 1), 256, "sgd"),
               ((784, 256, 10), 64, "adam"), ((33, 40, 17, 3), 37, "adam"),
               ((32, 256, 1), 256, "adam"),
               # Wider hidden tiles and float32's products split into bfloat16 parts
               # (mlp_epoch.tiles_for), at widths and batches no tile divides too.
               ((784, 256, 1024, 256, 10), 64, "sgd"), ((784, 1024, 10), 64, "sgd"),
               ((784, 512, 256, 10), 64, "adam"), ((784, 512, 256, 10), 64, "momentum"),
               ((784, 600, 300, 10), 50, "sgd"), ((784, 256, 1024, 256, 10), 64, "sgd", 16)]
EPOCH_STEPS = 20


def _epoch_reference(params, x, y, order, lr, optimizer, batch, model, steps=EPOCH_STEPS,
                     float64=True):
  """Per-step losses and final params of the same steps through train_step: float64 on the CPU
  (the reference), or float32 on the default device (xla's own distance from it)."""
  with jax.enable_x64(float64), jax.default_device(jax.devices("cpu" if float64 else None)[0]):
    dtype = jnp.float64 if float64 else jnp.float32
    p = jax.tree.map(lambda a: jnp.asarray(np.asarray(a), dtype), params)
    tx = train.make_optimizer(optimizer, lr)
    state, losses = tx.init(p), []
    step = jax.jit(functools.partial(train.train_step, tx=tx, model=model))
    # The pixels as the impls scale them: times 1/255 in the reference's float type.
    xs = numpy_mlp.to_float(np.asarray(x), np.float64 if float64 else np.float32)
    for s in range(steps):
      idx = order[s * batch:(s + 1) * batch]
      p, state, m = step(p, state, (xs[idx], y[idx]))
      losses.append(float(m["loss"]))
    return np.array(losses), [np.asarray(a) for a in jax.tree.leaves(p)]


def _distance(losses, leaves, ref_losses, ref_leaves) -> float:
  """A trajectory's distance from the reference's: the larger of its losses' and its final
  parameters' (each leaf's) relative error."""
  return max(rel_err(losses, ref_losses), *(rel_err(a, b) for a, b in zip(leaves, ref_leaves)))


def _same_bits(a, b) -> float:
  """0.0 where two pytrees of arrays hold the same bits, else inf (a check's error)."""
  same = all(np.array_equal(np.asarray(u), np.asarray(v))
             for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
  return 0.0 if same else np.inf


def _float32_bound(reference, *inputs):
  """float32's bound over a trajectory, and xla's own distance: the tolerance, or twice xla's
  float32 distance from the float64 ``reference`` on the same ``inputs`` (``_epoch_reference``'s
  arguments) where that is larger (20 float32 steps are chaotic: ``epoch_cases``)."""
  xla = _distance(*_epoch_reference(*inputs, float64=False), *reference)
  return max(TOLERANCE["float32"], 2 * xla), xla


def _epoch_inputs(rng, widths, batch, optimizer):
  """Fresh random inputs of one epoch case: data, labels (or targets), order, lr, params."""
  head = "mse" if widths[-1] == 1 else "xent"
  n = EPOCH_STEPS * batch + 5
  if head == "xent":
    x = rng.integers(0, 256, (n, widths[0]), dtype=np.uint8)
    y = rng.integers(0, widths[-1], n).astype(np.int32)
  else:
    x = rng.uniform(-1, 1, (n, widths[0])).astype(np.float32)
    y = (x ** 2).sum(1).astype(np.float32)
  order, lr = rng.permutation(n).astype(np.int32), (0.1 if head == "xent" else 0.002)
  if optimizer == "adam":
    lr = 1e-3
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths, bias=head == "xent")
  return x, y, order, lr, params


def _epoch_slice(text: str) -> slice:
  """``--epoch_cases``' FROM:TO as a slice; config.ConfigError (one line) if it is not one."""
  parts = text.split(":")
  if len(parts) == 2:
    try:
      return slice(*(int(p) if p.strip() else None for p in parts))
    except ValueError:
      pass
  raise config.ConfigError(f"--epoch_cases must be FROM:TO (e.g. 0:6), got {text!r}")


def epoch_cases(rng, interpret, cases=None):
  """The whole-epoch kernel (compiled on a GPU: one launch) against train_step in float64.

  float32 follows 20 steps, and 20 float32 steps on random labels are chaotic: a hidden
  pre-activation within rounding of 0 lands on the other side of its ReLU in one implementation
  and not another, and the difference grows (xla's own float32 steps leave float64 by more than
  1e-5 at half the draws of 784-256-1024-256-10, 2026-11-27 log). So the bound is twice xla's
  float32 distance on the same inputs where that is larger than the tolerance, and a kernel
  outside it gets one more, fresh draw: a wrong kernel fails both; a chaotic draw seldom twice.
  ``cases``: a part of EPOCH_CASES (all by default)."""
  for widths, batch, optimizer, *block in EPOCH_CASES if cases is None else cases:
    hidden_block = block[0] if block else None  # None: the plan's own choice.
    head = "mse" if widths[-1] == 1 else "xent"
    model = models.MLP if head == "xent" else models.REGRESSION
    name = f"epoch kernel {'-'.join(map(str, widths))} batch {batch} {optimizer}"
    first = _epoch_inputs(rng, widths, batch, optimizer)
    refs = {}  # float64 steps by (draw, steps): tf32's one step is bfloat16's too
    for precision in TOLERANCE:
      # Reduced precision: one step only, against the float64 step (the documented per-op
      # tolerances do not hold over a trajectory, where rounding compounds), and only what is
      # continuous in the rounding: the step's loss and the last layer's new weights.
      steps = EPOCH_STEPS if precision == "float32" else 1
      plan = mlp_epoch.make_plan(widths, batch, steps, head=head, bias=head == "xent",
                                 momentum=optimizer == "momentum", adam=optimizer == "adam",
                                 precision=precision, max_programs=fused_epoch.max_programs(),
                                 hidden_block=hidden_block)
      fn = jax.jit(functools.partial(mlp_epoch.train_epoch, plan=plan, fused=not interpret,
                                     interpret=interpret))
      label = f"{name} P={plan.programs} hidden_block={plan.hidden_block}"
      label += " split" if plan.split else ""
      draws = 2 if precision == "float32" else 1
      for draw in range(draws):
        x, y, order, lr, params = first if draw == 0 else _epoch_inputs(rng, widths, batch,
                                                                         optimizer)
        inputs = (params, x, y, order, lr, optimizer, batch, model, steps)
        if (draw, steps) not in refs:
          refs[draw, steps] = _epoch_reference(*inputs)
        ref = refs[draw, steps]
        got, _, losses, _ = fn(params, None, x, y, order, lr, 0.9)
        leaves, ref_leaves = jax.tree.leaves(got), ref[1]
        if precision != "float32":  # The last layer's leaves come last.
          leaves, ref_leaves = leaves[-len(params[-1]):], ref_leaves[-len(params[-1]):]
        err = _distance(losses, leaves, ref[0], ref_leaves)
        bound, shown = TOLERANCE[precision], label
        if precision == "float32":
          bound, xla_err = _float32_bound(ref, *inputs)
          shown += f" (xla {xla_err:.0e}{'; 2nd draw' if draw else ''})"
        if err < bound or draw == draws - 1:
          yield shown, precision, err, bound
          break


def hopper_cases(rng, interpret):
  """dense_mgpu's wgmma kernel alone against float64 (GPU only, Hopper: it has no interpret
  mode): the MLP's forward (bias, ReLU) and dW (partial sums) shapes at batch 8192 and 4096, in
  TF32 and bfloat16, from the inputs as the kernel sees them (rounded to bfloat16 there)."""
  if interpret or not dense_mgpu.on_hopper():
    print("skip dense_mgpu: not on a Hopper GPU")
    return
  fwd, dw = dense_mgpu.FWD_TILES, dense_mgpu.DW_TILES
  both, tf32 = (("tf32", jnp.float32), ("bfloat16", jnp.bfloat16)), (("tf32", jnp.float32),)
  # (M, N, K): the MLP's layers at batch 8192, and shapes of no tile (edges past M, N, K).
  for (m, n, k), tiles, precisions in [((8192, 256, 784), fwd, both), ((4104, 264, 520), fwd, tf32),
                                       ((784, 256, 8192), dw, both), ((520, 264, 4104), dw, tf32)]:
    for precision, dtype in precisions:
      a = jnp.asarray(rng.standard_normal((m, k)), dtype)
      b = jnp.asarray(rng.standard_normal((n, k)) / np.sqrt(k), dtype)
      a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
      # tf32 products, and for float32 inputs 3xTF32 ones as well (float32's tolerance).
      x3_too = (("float32", True),) if dtype == jnp.float32 else ()
      for check, x3 in ((precision, False),) + x3_too:
        ab = (dense_mgpu.split_tf32(a), dense_mgpu.split_tf32(b)) if x3 else (a, b)
        t = tiles
        if x3:
          t = dense_mgpu.X3_FWD_TILES if tiles.splits == 1 else dense_mgpu.X3_DW_TILES
        if t.splits == 1:
          bias = rng.standard_normal(n).astype(np.float32)
          got = dense_mgpu.matmul_nt(*ab, jnp.asarray(bias), relu=True, tiles=t)
          want = np.maximum(a64 @ b64.T + bias, 0)
        else:
          got = common.sum_parts(dense_mgpu.matmul_nt(*ab, tiles=t))
          want = a64 @ b64.T
        yield (f"hopper matmul_nt m={m} n={n} k={k} splits={t.splits}{' 3xTF32' if x3 else ''}",
               check, rel_err(got, want))


# (hidden width, steps): 2, 4, 8 and 16 CTAs, and two clusters of 16; one step, an odd count (a
# last step outside the kernel's two-step loop) and a whole epoch of the large set.
CLUSTER_CASES = [(64, 1), (128, 7), (256, 100), (512, 20), (1024, 7), (1024, 100)]


def cluster_cases(rng, interpret):
  """cluster_epoch_mgpu's kernel (GPU only, Hopper: Mosaic GPU's interpreter does not model peer
  reads) against the same steps through train_step in float64."""
  if interpret or not dense_mgpu.on_hopper():
    print("skip cluster_epoch_mgpu: not on a Hopper GPU")
    return
  for hidden, steps in CLUSTER_CASES:
    batch = cluster_epoch_mgpu.BATCH
    n = steps * batch + 5
    x, y = synthetic.make_regression(n, rng, cluster_epoch_mgpu.INPUTS)
    order, lr = rng.permutation(n).astype(np.int32), 0.002
    params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))),
                          (cluster_epoch_mgpu.INPUTS, hidden, 1), bias=False)
    ref_losses, ref_params = _epoch_reference(params, x, y, order, lr, "sgd", batch,
                                              models.REGRESSION, steps)
    fn = jax.jit(functools.partial(cluster_epoch_mgpu.train_epoch, lr=lr, steps=steps,
                                   use_kernel=True))
    got, losses = fn(params, x, y, order)
    err = _distance(losses, jax.tree.leaves(got), ref_losses, ref_params)
    yield f"cluster epoch 32-{hidden}-1 batch {batch} {steps} steps", "float32", err


# Steps of the phase kernels' cases: one, and a whole epoch of the large set.
GRID_REGRESSION_STEPS = [1, 100]


def grid_regression_cases(rng, interpret):
  """grid_regression_mgpu's kernel (32-256-256-1): see ``_phase_kernel_cases``."""
  k = grid_regression_mgpu
  yield from _phase_kernel_cases(rng, interpret, k, (k.INPUTS, k.HIDDEN, k.HIDDEN, 1),
                                 "grid regression")


def tile_regression_cases(rng, interpret):
  """tile_regression_mgpu's kernel (32-256-1024-256-1): see ``_phase_kernel_cases``."""
  yield from _phase_kernel_cases(rng, interpret, tile_regression_mgpu,
                                 tile_regression_mgpu.WIDTHS, "tile regression")


def _phase_kernel_cases(rng, interpret, k, widths, name):
  """A regression net's phase kernel (GPU only, Hopper: the interpreter cannot run its global
  semaphore) against the same steps through train_step in float64, bounded by float32's
  tolerance or twice xla's own distance; run twice (the same bits)."""
  if interpret or not dense_mgpu.on_hopper():
    print(f"skip {k.__name__.split('.')[-1]}: not on a Hopper GPU")
    return
  net = "-".join(map(str, widths))
  for steps in GRID_REGRESSION_STEPS:
    n = steps * k.BATCH + 5
    x, y = synthetic.make_regression(n, rng, k.INPUTS)
    order, lr = rng.permutation(n).astype(np.int32), 0.002
    params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths, bias=False)
    inputs = (params, x, y, order, lr, "sgd", k.BATCH, models.REGRESSION, steps)
    reference = _epoch_reference(*inputs)
    bound, xla = _float32_bound(reference, *inputs)
    fn = jax.jit(functools.partial(k.train_epoch, lr=lr, steps=steps, use_kernel=True))
    got, losses = fn(params, x, y, order)
    err = _distance(losses, jax.tree.leaves(got), *reference)
    print(f"     {name} {steps} steps: xla's float32 distance {xla:.2e}")
    yield (f"{name} {net} batch {k.BATCH} {steps} steps", "float32", err, bound)
    yield (f"{name} {steps} steps: the same bits twice", "float32",
           _same_bits((got, losses), fn(params, x, y, order)))


TILE_MLP_STEPS = [1, 20]


def tile_mlp_cases(rng, interpret):
  """tile_mlp_mgpu's kernel (MLP 784-256-1024-256-10 on resident weight tiles; GPU only,
  Hopper) against the same steps through train_step in float64, bounded by float32's tolerance
  or twice xla's own distance; run twice (the same bits)."""
  k = tile_mlp_mgpu
  if interpret or not dense_mgpu.on_hopper():
    print("skip tile_mlp_mgpu: not on a Hopper GPU")
    return
  for steps in TILE_MLP_STEPS:
    x, y, order, params = _mlp_inputs(rng, k.WIDTHS, steps, k.BATCH)
    lr = 0.1
    inputs = (params, x, y, order, lr, "sgd", k.BATCH, models.MLP, steps)
    reference = _epoch_reference(*inputs)
    bound, xla = _float32_bound(reference, *inputs)
    fn = jax.jit(functools.partial(k.train_epoch, lr=lr, steps=steps, use_kernel=True))
    got, losses, _ = fn(params, x, y, order)
    err = _distance(losses, jax.tree.leaves(got), *reference)
    print(f"     tile mlp {steps} steps: xla's float32 distance {xla:.2e}")
    yield (f"tile mlp 784-256-1024-256-10 batch 64 {steps} steps", "float32", err, bound)
    yield (f"tile mlp {steps} steps: the same bits twice", "float32",
           _same_bits((got, losses), fn(params, x, y, order)))


# (steps, whether the members share one set of batches): one step, several of each kind.
STREAM_POPULATION_CASES = [(1, False), (20, False), (20, True)]


def stream_population_cases(rng, interpret, members=3):
  """stream_population_mgpu's kernel (a population of MLPs 784-256-10, their weights streamed
  from global memory; GPU only, Hopper): each member, its own learning rate and batches (or the
  population's one set), against its own steps through train_step in float64, bounded by
  float32's tolerance or twice xla's own distance; run twice (the same bits)."""
  k = stream_population_mgpu
  if interpret or not dense_mgpu.on_hopper():
    print("skip stream_population_mgpu: not on a Hopper GPU")
    return
  lrs = [0.05, 0.1, 0.2][:members]
  for steps, shared in STREAM_POPULATION_CASES:
    draws = [_mlp_inputs(rng, (784, 256, 10), steps, k.BATCH) for _ in range(members)]
    x, y = draws[0][0], draws[0][1]  # One data set; each member its own order (or the first)
    orders = np.stack([d[2] for d in draws[:1 if shared else members]])
    params = jax.tree.map(lambda *a: jnp.stack(a), *[d[3] for d in draws])
    xs, onehot = k.batches(jnp.asarray(x), jnp.asarray(y), jnp.asarray(orders), steps)
    fn = jax.jit(k.train_steps)
    got, losses, _ = fn(params, jnp.float32(lrs), xs, onehot)
    kind = "one set of batches" if shared else "own batches"
    for i in range(members):
      inputs = (draws[i][3], x, y, orders[0 if shared else i], lrs[i], "sgd", k.BATCH,
                models.MLP, steps)
      reference = _epoch_reference(*inputs)
      bound, xla = _float32_bound(reference, *inputs)
      err = _distance(losses[i], [a[i] for a in jax.tree.leaves(got)], *reference)
      print(f"     stream population member {i}, {steps} steps: xla's float32 distance "
            f"{xla:.2e}")
      yield (f"stream population member {i} of {members} ({kind}) {steps} steps", "float32",
             err, bound)
    yield (f"stream population {steps} steps ({kind}): the same bits twice", "float32",
           _same_bits((got, losses), fn(params, jnp.float32(lrs), xs, onehot)))


# Steps: one, and several. Each count is its own kernel, compiled apart, so two counts only.
CLUSTER_MLP_STEPS = [1, 7]


def cluster_mlp_cases(rng, interpret):
  """cluster_mlp_mgpu's kernel (GPU only, Hopper) against the same steps through train_step in
  float64: per-step losses and final parameters."""
  if interpret or not dense_mgpu.on_hopper():
    print("skip cluster_mlp_mgpu: not on a Hopper GPU")
    return
  if why := cluster_mlp_mgpu.lowers():
    print(f"skip cluster_mlp_mgpu: {why}")
    return
  for steps in CLUSTER_MLP_STEPS:
    x, y, order, params = _cluster_inputs(rng, cluster_mlp_mgpu.HIDDEN, steps)
    lr = 0.1
    ref_losses, ref_params = _epoch_reference(params, x, y, order, lr, "sgd",
                                              cluster_mlp_mgpu.BATCH, models.MLP, steps)

    # float32 over every case; the reduced precisions in the one-step case, on what is
    # continuous in the rounding (the loss and the last layer: see epoch_cases).
    for precision in ("float32", "tf32", "bfloat16") if steps == 1 else ("float32",):
      @jax.jit
      def run(params, x, y, order):
        return cluster_mlp_mgpu.train_epoch(params, x, y, order, lr, steps=steps,
                                            precision=precision)
      got, losses, _ = run(params, x, y, order)
      leaves = jax.tree.leaves(got)
      if precision != "float32":  # The last layer's leaves come last.
        err = _distance(losses, leaves[-2:], ref_losses, ref_params[-2:])
      else:
        err = _distance(losses, leaves, ref_losses, ref_params)
      yield f"cluster mlp 784-256-10 batch 64 {steps} steps", precision, err
  yield from cluster_population_cases(rng)
  yield from cluster_groups_cases(rng)
  yield from cluster_batch_cases(rng)


def cluster_batch_cases(rng, steps=20):
  """cluster_mlp_mgpu at the larger batches (64 P rows in P passes, the gradients added up over
  the passes; at batch 256 and 512 in several clusters, the passes split: ``ROWGROUPS``)
  against float64 train_step over ``steps`` steps, bounded as the epoch family's float32, and
  run twice (the same bits); 784-512-10 (two clusters of units) at batch 128; the reduced
  precisions in one step, on the loss and the last layer (as the single network's cases)."""
  lr = 0.1
  for hidden, batch in [(256, b) for b in cluster_mlp_mgpu.BATCHES[1:]] + [(512, 128)]:
    run = jax.jit(functools.partial(cluster_mlp_mgpu.train_epoch, lr=lr, steps=steps,
                                    batch=batch))
    x, y, order, params = _cluster_inputs(rng, hidden, steps, batch)
    got, losses, _ = run(params, x, y, order)
    inputs = (params, x, y, order, lr, "sgd", batch, models.MLP, steps)
    ref = _epoch_reference(*inputs)
    bound, xla_err = _float32_bound(ref, *inputs)
    rowgroups = cluster_mlp_mgpu.rowgroups_for(hidden, batch)
    split = f" in {rowgroups} clusters" if rowgroups > 1 else ""
    name = f"cluster mlp 784-{hidden}-10 batch {batch}{split} {steps} steps (xla {xla_err:.0e})"
    yield name, "float32", _distance(losses, jax.tree.leaves(got), *ref), bound
    yield (f"cluster mlp 784-{hidden}-10 batch {batch}{split} twice: the same bits", "float32",
           _same_bits((got, losses), run(params, x, y, order)[:2]))
    if hidden != 256:
      continue
    ref1 = _epoch_reference(*inputs[:-1], 1)
    for precision in ("tf32", "bfloat16"):
      got, losses, _ = jax.jit(functools.partial(
          cluster_mlp_mgpu.train_epoch, lr=lr, steps=1, batch=batch, precision=precision))(
              params, x, y, order)
      yield (f"cluster mlp 784-256-10 batch {batch}{split} 1 step", precision,
             _distance(losses, jax.tree.leaves(got)[-2:], ref1[0], ref1[1][-2:]))


def logreg_cases(rng, interpret, steps=20):
  """logreg_mgpu's kernel (softmax regression's epoch in one CTA; compiled on a Hopper GPU, in
  Mosaic GPU's interpreter on the CPU where this jax has one, 3 steps there) against the same
  steps through train_step in float64, bounded as the epoch family's float32; the reduced
  precisions in one step (loss and parameters); a population of three, a CTA each, each member
  against float64. Compiled, also: run twice, and a member against its single run, the same
  bits (the interpreter goes through XLA on the CPU, whose rounding of the single run's
  constant learning rate may differ in the last bit)."""
  from jax.experimental.pallas import mosaic_gpu as plgpu
  if interpret and not hasattr(plgpu, "InterpretGPUParams"):
    print("skip logreg_mgpu: this jax has no Mosaic GPU interpreter")
    return
  if not interpret and not dense_mgpu.on_hopper():
    print("skip logreg_mgpu: not on a Hopper GPU")
    return
  steps = 3 if interpret else steps
  lr, n = 0.1, steps * logreg_mgpu.BATCH + 5
  x = rng.integers(0, 256, (n, logreg_mgpu.INPUTS), dtype=np.uint8)
  y = rng.integers(0, logreg_mgpu.CLASSES, n).astype(np.int32)
  order = rng.permutation(n).astype(np.int32)
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), (784, 10))
  params = jax.tree.map(lambda a: a + 0.01 * jnp.asarray(rng.standard_normal(a.shape), a.dtype),
                        params)  # the bias off 0, so its gradient counts

  def run(precision, k):
    xs, onehot = logreg_mgpu.batches(jnp.asarray(x), jnp.asarray(y), order, k)
    return jax.jit(functools.partial(logreg_mgpu.train_steps, lr=lr, precision=precision,
                                     interpret=interpret))(params, xs, onehot)
  inputs = (params, x, y, order, lr, "sgd", logreg_mgpu.BATCH, models.LOGREG, steps)
  ref = _epoch_reference(*inputs)
  bound, xla_err = _float32_bound(ref, *inputs)
  single = run("float32", steps)
  yield (f"logreg 784-10 batch 64 {steps} steps (xla {xla_err:.0e})", "float32",
         _distance(single[1], jax.tree.leaves(single[0]), *ref), bound)
  if not interpret:
    yield ("logreg 784-10 twice: the same bits", "float32",
           _same_bits(single[1], run("float32", steps)[1]))
  ref1 = _epoch_reference(*inputs[:-1], 1)
  for precision in ("tf32", "bfloat16"):
    got, losses, _ = run(precision, 1)
    yield "logreg 784-10 1 step", precision, _distance(losses, jax.tree.leaves(got), *ref1)
  # A population of three, a CTA each, each its own batches and learning rate: each against
  # float64, and member 1 (lr 0.1, the inputs above) against the single run (the same bits).
  # (Not 0.2: on these random pixels it blows up, losses near 12 by step 20, and float32 runs
  # part by 2e-4 from float64 there: a chaotic draw, not a measure of the kernel.)
  lrs = [0.05, lr, 0.02]
  orders = [rng.permutation(n).astype(np.int32), order, rng.permutation(n).astype(np.int32)]
  data = [logreg_mgpu.batches(jnp.asarray(x), jnp.asarray(y), o, steps) for o in orders]
  stacked = jax.tree.map(lambda a: jnp.stack([a] * 3), params)
  pop = jax.jit(functools.partial(logreg_mgpu.train_population, interpret=interpret))(
      stacked, jnp.stack([d[0] for d in data]), jnp.stack([d[1] for d in data]),
      jnp.asarray(lrs, jnp.float32))
  for i, (member_lr, member_order) in enumerate(zip(lrs, orders)):
    member = jax.tree.map(lambda a: a[i], pop)
    inputs_i = (params, x, y, member_order, member_lr, "sgd", logreg_mgpu.BATCH, models.LOGREG,
                steps)
    ref_i = _epoch_reference(*inputs_i)
    yield (f"logreg population member {i} of 3, lr {member_lr}", "float32",
           _distance(member[1], jax.tree.leaves(member[0]), *ref_i),
           _float32_bound(ref_i, *inputs_i)[0])
  if interpret:
    return
  yield ("logreg population member 1 vs its single run: the same bits", "float32",
         _same_bits(jax.tree.map(lambda a: a[1], pop), single))
  # Four members on two sets of batches (member i on set i mod 2, as members sharing a seed):
  # member 3 (set 1: the single run's batches, its lr) gives the single run's bits.
  shared = jax.jit(logreg_mgpu.train_population)(
      jax.tree.map(lambda a: jnp.stack([a] * 4), params), jnp.stack([data[0][0], data[1][0]]),
      jnp.stack([data[0][1], data[1][1]]), jnp.asarray([0.05, 0.02, 0.02, lr], jnp.float32))
  yield ("logreg 4 members on 2 sets of batches: member 3 = its single run", "float32",
         _same_bits(jax.tree.map(lambda a: a[3], shared), single))


def _cluster_inputs(rng, hidden: int, steps: int, batch: int = cluster_mlp_mgpu.BATCH):
  """Fresh inputs of a cluster_mlp_mgpu case of 784-``hidden``-10: see ``_mlp_inputs``."""
  widths = (cluster_mlp_mgpu.INPUTS, hidden, cluster_mlp_mgpu.CLASSES)
  return _mlp_inputs(rng, widths, steps, batch)


def _mlp_inputs(rng, widths, steps: int, batch: int):
  """Fresh inputs of an MLP kernel's case: ``steps`` batches' pixels and labels, their order,
  and parameters with biases off 0 (so their gradients count)."""
  n = steps * batch + 5
  x = rng.integers(0, 256, (n, widths[0]), dtype=np.uint8)
  y = rng.integers(0, widths[-1], n).astype(np.int32)
  order = rng.permutation(n).astype(np.int32)
  params = mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths)
  params = jax.tree.map(lambda a: a + 0.01 * jnp.asarray(rng.standard_normal(a.shape), a.dtype),
                        params)
  return x, y, order, params


def cluster_groups_cases(rng, steps=20):
  """cluster_mlp_mgpu on networks of several clusters (784-512-10 and 784-1000-10, padded to
  1024: their class sums meet at a grid barrier every step), of more groups than the GPU holds
  clusters (784-2048-10: 128 CTAs without clusters, exchanging through global memory) and of a
  padded cluster (784-128-10) against float64 train_step over ``steps`` steps, bounded as the
  epoch family's float32 (twice xla's own float32 distance where larger; outside it, one fresh
  draw, as there), and run twice: the same bits."""
  lr = 0.1
  for hidden in (128, 512, 1000, 2048):
    run = jax.jit(functools.partial(cluster_mlp_mgpu.train_epoch, lr=lr, steps=steps))
    clusters = -(-hidden // cluster_mlp_mgpu.HIDDEN)
    first = ""
    for draw in range(2):
      x, y, order, params = _cluster_inputs(rng, hidden, steps)
      got, losses, _ = run(params, x, y, order)
      inputs = (params, x, y, order, lr, "sgd", cluster_mlp_mgpu.BATCH, models.MLP, steps)
      ref = _epoch_reference(*inputs)
      bound, xla_err = _float32_bound(ref, *inputs)
      err = _distance(losses, jax.tree.leaves(got), *ref)
      if err < bound or draw == 1:
        break
      first = f"; 2nd draw, the 1st {err:.1e} (xla {xla_err:.0e})"
    clusters = (f"{clusters} groups without clusters"
                if cluster_mlp_mgpu._flat(clusters) else f"{clusters} clusters")
    name = (f"cluster mlp 784-{hidden}-10 ({clusters}) {steps} steps "
            f"(xla {xla_err:.0e}{first})")
    yield name, "float32", err, bound
    yield (f"cluster mlp 784-{hidden}-10 twice: the same bits", "float32",
           _same_bits(losses, run(params, x, y, order)[1]))
  # The reduced precisions in one step of two clusters, on what is continuous in the rounding
  # (the loss and the last layer), as the single network's cases.
  x, y, order, params = _cluster_inputs(rng, 512, 1)
  ref_losses, ref_params = _epoch_reference(params, x, y, order, lr, "sgd",
                                            cluster_mlp_mgpu.BATCH, models.MLP, 1)
  for precision in ("tf32", "bfloat16"):
    got, losses, _ = jax.jit(functools.partial(cluster_mlp_mgpu.train_epoch, lr=lr, steps=1,
                                               precision=precision))(params, x, y, order)
    yield ("cluster mlp 784-512-10 (2 clusters) 1 step", precision,  # Its last layer's leaves
           _distance(losses, jax.tree.leaves(got)[-2:], ref_losses, ref_params[-2:]))


def cluster_population_cases(rng, members=3, steps=CLUSTER_MLP_STEPS[-1]):
  """A population through cluster_mlp_mgpu (a cluster a member, each its own batches and
  learning rate): each member against float64, and member 0 against the single-network
  kernel's run of it (the error there is 0 when the bits are the same)."""
  widths = (cluster_mlp_mgpu.INPUTS, cluster_mlp_mgpu.HIDDEN, cluster_mlp_mgpu.CLASSES)
  n = steps * cluster_mlp_mgpu.BATCH + 5
  x = jnp.asarray(rng.integers(0, 256, (n, cluster_mlp_mgpu.INPUTS), dtype=np.uint8))
  y = jnp.asarray(rng.integers(0, cluster_mlp_mgpu.CLASSES, n).astype(np.int32))
  orders = np.stack([rng.permutation(n) for _ in range(members)]).astype(np.int32)
  lrs = np.asarray([0.05, 0.1, 0.2][:members] + [0.1] * (members - 3), np.float32)
  params = [jax.tree.map(lambda a: a + 0.01 * jnp.asarray(rng.standard_normal(a.shape), a.dtype),
                         mlp.init_mlp(jax.random.key(int(rng.integers(1 << 30))), widths))
            for _ in range(members)]  # biases off 0, as in the single network's cases
  stacked = jax.tree.map(lambda *a: jnp.stack(a), *params)

  @jax.jit
  def run(params, orders, lrs):
    xs, onehot = jax.vmap(lambda o: cluster_mlp_mgpu.batches(x, y, o, steps))(orders)
    return cluster_mlp_mgpu.train_population(params, xs, onehot, lrs)
  got, losses, _ = run(stacked, orders, lrs)
  for i in range(members):
    ref_losses, ref_params = _epoch_reference(params[i], x, y, orders[i], float(lrs[i]), "sgd",
                                              cluster_mlp_mgpu.BATCH, models.MLP, steps)
    mine = jax.tree.leaves(jax.tree.map(lambda a: a[i], got))
    err = _distance(losses[i], mine, ref_losses, ref_params)
    yield f"cluster mlp population member {i} of {members}, lr {lrs[i]}", "float32", err
    if i:
      continue  # One member's single run: a kernel compiles for each learning rate (30 s).
    alone, alone_losses, _ = jax.jit(functools.partial(
        cluster_mlp_mgpu.train_epoch, lr=float(lrs[i]), steps=steps))(params[i], x, y, orders[i])
    diff = max(rel_err(losses[i], np.asarray(alone_losses, np.float64)),
               *(rel_err(a, np.asarray(b, np.float64))
                 for a, b in zip(mine, jax.tree.leaves(alone))))
    yield f"cluster mlp population member {i} vs its single-network run", "float32", diff


def barrier_cases(rng, interpret):
  """Every value exchanged across the grid barrier, over thousands of rounds (GPU only: in
  interpret mode the programs run one by one and a spin barrier never opens)."""
  del rng
  if interpret:
    print("skip grid barrier stress: interpret mode")
    return
  for programs in sorted({16, 128, fused_epoch.max_programs()}):
    for warps in (4, 8):
      bad = np.asarray(mlp_epoch.barrier_stress(programs, _BARRIER_ROUNDS.value,
                                                num_warps=warps))
      yield (f"grid barrier P={programs} warps={warps} rounds={_BARRIER_ROUNDS.value} "
             f"wrong={int(bad.sum())}"), "float32", float(bad.sum())


def population_cases(rng, interpret):
  """One step of the population step kernels, vmapped over members as a population runs them,
  against the float64 plain-jnp twin: new weights, the next batch's activations, row losses."""
  ps = population_step
  for members, b, k, n, c in [(4, 64, 784, 256, 10), (3, 5, 50, 37, 3), (2, 128, 100, 70, 10)]:
    weights = [rng.standard_normal((members, k, n)) / np.sqrt(k),
               0.1 * rng.standard_normal((members, n)),
               rng.standard_normal((members, n, c)) / np.sqrt(n),
               0.1 * rng.standard_normal((members, c))]
    weights = [w.astype(np.float32) for w in weights]
    x, x_next = rng.integers(0, 256, (2, members, b, k)).astype(np.uint8)
    y = rng.integers(0, c, (members, b)).astype(np.int32)
    lr = rng.uniform(0.05, 0.5, members).astype(np.float32)
    with jax.enable_x64(True):
      ref = jax.vmap(ps.reference)(*(jnp.asarray(w, jnp.float64) for w in weights), x, y,
                                        jnp.asarray(lr, jnp.float64), x_next)
      ref = [np.asarray(r) for r in ref]
    # XLA's own TF32 step: h_next's error in TF32 is as large as its tolerance (the update's
    # rounding, coherent over the pixels, all positive: 1.4e-3 to 1.6e-2 over 40 draws of
    # this case, TF32 emulated in numpy), so TF32's bound is twice XLA's where that is larger.
    xla_step = functools.partial(ps.reference, precision=lax.Precision.DEFAULT)
    xla_tf32 = jax.jit(jax.vmap(xla_step))(*weights, x, y, lr, x_next)
    xla_err = max(rel_err(g, r) for g, r in zip(xla_tf32[:6], ref[:6]))
    tf32_bound = max(TOLERANCE["tf32"], 2 * xla_err if np.isfinite(xla_err) else 0.0)
    for precision in TOLERANCE:
      kw = dict(precision=precision, interpret=interpret)

      def step(w0, b0, w1, b1, x, y, lr, x_next):
        _, h = ps.update_forward(w0, None, None, x, b0, **kw)
        gs, b0, w1, b1, rows, correct = ps.head_update(h, y, b0, w1, b1, lr, **kw)
        w0, h_next = ps.update_forward(w0, x, gs, x_next, b0, **kw)
        return w0, b0, w1, b1, h_next, rows, correct

      got = jax.jit(jax.vmap(step))(*weights, x, y, lr, x_next)
      errs = [rel_err(g, r) for g, r in zip(got[:6], ref[:6])]
      if precision == "bfloat16":
        # h_next: sums over 784 bf16-rounded products that largely cancel (measured 1e-2 to
        # 2.4e-2 on CPU); it is checked in float32 and TF32.
        del errs[4]
      err = max(errs)
      if precision == "float32" and not np.array_equal(got[6], ref[6]):
        err = np.inf
      case = f"population step m={members} b={b} k={k} n={n} c={c}"
      yield (case, precision, err) + ((tf32_bound,) if precision == "tf32" else ())


# The groups whose kernels are all Mosaic GPU (the others lower through Triton, the barrier
# group's stress included: ``mlp_epoch``).
MOSAIC_GROUPS = ("hopper", "cluster", "cluster_mlp", "grid_regression", "tile_regression",
                 "tile_mlp", "stream_population", "logreg")
GROUPS = ("dense", "hopper", "xent", "head", "conv", "step", "epoch", "cluster", "cluster_mlp",
          "grid_regression", "tile_regression", "tile_mlp", "stream_population", "logreg",
          "barrier", "population", "triton")


def main(argv):
  del argv
  cli.known("--only group(s)", _ONLY.value, GROUPS)
  cli.at_least("barrier_rounds", _BARRIER_ROUNDS.value, 1)
  epoch_slice = _epoch_slice(_EPOCH_CASES.value)
  if _SEED.value is not None and (why := config.seed_problem("--seed", _SEED.value)):
    raise config.ConfigError(why)
  interpret = common.interpret_default()
  seed = _SEED.value if _SEED.value is not None else int(np.random.default_rng().integers(2**31))
  rng = np.random.default_rng(seed)
  d = jax.devices()[0]
  print(f"device {d.platform}: {d.device_kind}; jax {jax.__version__}; "
        f"{'interpret mode' if interpret else 'compiled kernels'}; inputs of --seed={seed}")
  failures, count = 0, 0
  groups = {"dense": dense_cases, "hopper": hopper_cases, "xent": xent_cases,
            "head": head_cases, "conv": conv_cases,
            "step": step_cases, "cluster": cluster_cases,
            "epoch": functools.partial(epoch_cases, cases=EPOCH_CASES[epoch_slice]),
            "cluster_mlp": cluster_mlp_cases, "grid_regression": grid_regression_cases,
            "tile_regression": tile_regression_cases, "tile_mlp": tile_mlp_cases,
            "stream_population": stream_population_cases,
            "logreg": logreg_cases,
            "barrier": barrier_cases,
            "population": population_cases, "triton": triton_cases}
  def guarded(g):  # A group's cases, a Mosaic group's with Triton lowerings as errors
    try:
      with guard_flags.guard(g in MOSAIC_GROUPS):
        yield from groups[g](rng, interpret)
    except ValueError as e:  # The guard's: the group lowered a Triton kernel. A miss, not a stop.
      if not backends.forbidden(e):
        raise
      yield f"{g}: lowered a Pallas Triton kernel", "float32", np.inf
  guarded_groups = [g for g in _ONLY.value if g in MOSAIC_GROUPS]
  if guard_flags.active() and not interpret and guarded_groups:
    print(f"the Mosaic groups ({', '.join(guarded_groups)}) run with Pallas' Triton backend as "
          "an error (--noforbid_triton: as a warning)")
  cases = (c for g in _ONLY.value for c in guarded(g))
  for case, precision, err, *bound in cases:  # A case may bring its own bound.
    ok = err < (bound[0] if bound else TOLERANCE[precision])
    failures += not ok
    count += 1
    if not ok or precision == "float32" or bound:
      own = f" (bound {bound[0]:.1e})" if bound else ""
      print(f"{'ok  ' if ok else 'FAIL'} {case:52s} {precision:9s} rel err {err:.2e}{own}")
  print(f"{count - failures}/{count} checks passed (tolerances: {TOLERANCE})")
  if failures:
    print(f"the same inputs again: --seed={seed}")
  sys.exit(1 if failures else 0)


if __name__ == "__main__":
  cli.run(main)
