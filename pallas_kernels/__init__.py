"""Hand-written Pallas GPU kernels for jaxshallow's ops (one module per fused op)."""
