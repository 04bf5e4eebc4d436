"""Several devices and several processes: one-axis meshes and arrays placed on them
(``placement``), data-parallel training of one network (``data_parallel``), and joining a
multi-process run (``distributed``).
"""
