"""The NumPy reference: every model's forward, backward and update written by hand on the host,
in float32 or float64, with no JAX. It is the independent check of the other impls.
"""
