"""The user's scripts: train a network (``mnist``, ``regression``), a grid of them as one
population (``sweep``), compare two impls (``parity``) and check every kernel compiled for this
machine against float64 (``check_kernels``). Their flags: ``config_flags``.
"""
