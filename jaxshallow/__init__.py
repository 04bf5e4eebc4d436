"""jaxshallow: shallow networks on MNIST-class data, as fast as the GPU allows.

The functional API::

    from jaxshallow import init_mlp, make_optimizer, train_step, train_epoch, evaluate
    from jaxshallow import population   # many networks at once: population.train_epoch
"""

from jaxshallow.data import DataError, load as load_dataset
from jaxshallow.mlp import apply_mlp, init_mlp
from jaxshallow.ops import IMPLS, PRECISIONS, Ops, get_ops
from jaxshallow.train import (check_labels, epoch_order, evaluate, loss_fn, make_optimizer,
                              train_epoch, train_step)
from jaxshallow import population  # population.train_epoch: many networks in one program

__version__ = "0.1.0"
