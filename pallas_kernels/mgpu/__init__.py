"""Building blocks for Pallas' Mosaic GPU backend (Hopper and newer), not kernels of their own:
``cluster_push`` copies rows of shared memory into the other CTAs of a thread-block cluster,
each copy signalling the receiver's barrier; ``grid_barrier`` meets every CTA of a launch;
``descriptors`` gives wgmma operands whose descriptors are built where their product runs;
``layout_search`` speeds jax 0.11's layout inference.
"""
