"""What the grid epoch kernel (``mlp_epoch``) holds, apart from its code: choosing a path reads
these without importing the kernel, whose Pallas Triton front end a warm run (the epoch loaded
from the compilation cache, nothing traced) then never imports (about 0.1 s on the H100's host,
docs/design/time_to_result.md)."""

MAX_BATCH = 512  # Rows of a step held in registers; larger batches use the op kernels.
MAX_OUTPUTS = 128  # The last layer's outputs must fit one tile.
