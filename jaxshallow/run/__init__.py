"""From a configuration to a result: the settings and their checks (``config``), the trainers
that hold a model's state and train it an epoch at a time (``trainers``), and the runs the
scripts share (``runner`` for one network, ``population_run`` for a grid of them).
"""
