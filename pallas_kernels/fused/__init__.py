"""Fused kernels: where a training step, a population's step or a whole epoch runs in a few
launches, or one, instead of the op kernels' one launch an op. Step kernels: ``conv_batch``
(the CNN's batch gathered inside its first convolution) and ``sgd_parts`` (every parameter's
update in one launch); population kernels: ``population_step``; epoch kernels: ``mlp_epoch``
(a grid of programs meeting at grid-wide barriers), ``cluster_mlp_mgpu`` and
``cluster_epoch_mgpu`` (one thread-block cluster of a Hopper GPU), ``grid_regression_mgpu``
(layers as phases over 64 CTAs), ``logreg_mgpu`` (one CTA). The backend is in the name:
``_mgpu`` modules lower through Pallas' Mosaic GPU backend, the others through Triton.
"""
