"""Probes of the hardware behind the kernels' designs (Hopper GPUs): what a cluster's exchanges,
a warpgroup's pieces and the regression net's cluster kernel cost alone. Not part of training.
"""
