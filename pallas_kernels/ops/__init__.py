"""Op kernels: one differentiable op a module, each a ``jax.custom_vjp`` whose forward and
backward are Pallas kernels, with its ``pallas_call`` wrappers and a plain-jnp reference beside
it (the shape of JAX's ``jax.experimental.pallas.ops.gpu``). ``jaxshallow.ops.pallas_ops`` wires
them into the models. The backend is in the name: modules ending in ``_mgpu`` lower through
Pallas' Mosaic GPU backend (Hopper and newer); the others through its Triton backend.
"""
