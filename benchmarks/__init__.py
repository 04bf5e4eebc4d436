"""Benchmarks: the impls and their PyTorch peers side by side (``bench``), populations
(``population_bench``), kernel by kernel (``kernel_times``) and what a loop or a launch costs
(``floors``). GPU for real figures; ``--quick`` forms run on the CPU.
"""
