"""Hand-written Pallas GPU kernels for jaxshallow, by role:

  ops/     op kernels: one differentiable op a module (``jax.custom_vjp``, forward and backward
           in Pallas), with its ``pallas_call`` wrappers and a plain-jnp reference
  fused/   step, population and epoch kernels: a training step, a population's step or a whole
           epoch in a few launches, or one
  mgpu/    building blocks for Pallas' Mosaic GPU backend (cluster exchanges)
  common   helpers of the Triton-lowered kernels (tile loads with masks, fixed-order sums)
  autotune timing the dense kernels' block sizes per shape, cached on disk

A module whose name ends in ``_mgpu`` lowers through Pallas' Mosaic GPU backend (Hopper GPUs);
every other kernel through Pallas' Triton backend. Without a GPU the Triton-lowered kernels run
in Pallas' interpret mode. The package stands on its own: it imports jax, never the library
that uses it (``jaxshallow.ops.pallas_ops`` wires the ops into the models, and
``jaxshallow.paths`` decides which kernels train a network).
"""
