"""The library's side of the fused Pallas kernels: each module gives a kernel the shape of the
function it replaces (params and optax state in, params, optax state and metrics out), so that
``train.train_epoch`` and ``population.train_epoch`` can call it. ``epoch``: the MLP family's
whole epoch; ``step``: the CNN's step kernels; ``population``: the population step kernels.
"""
