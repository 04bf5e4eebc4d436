"""The lowered text of cluster_mlp_mgpu's 784-2048-10 kernel (3 steps) into sys.argv[1], on the
CPU: ``PYTHONPATH=. python lower_text.py out.mlir`` (run from the repository root)."""
import sys, jax
sys.path.insert(0, "tests")
from test_cluster_mlp_mgpu import _abstract
from pallas_kernels.fused import cluster_mlp_mgpu as cm
fn = jax.jit(lambda p, x, o: cm.train_steps(p, x, o, 0.5))
open(sys.argv[1], "w").write(fn.trace(*_abstract(2048, 3)).lower(lowering_platforms=("cuda",)).as_text())
