"""experiments.parity with the step's clusters forced (argv[1]: rowgroups at 256 and 512)."""
import sys
from pallas_kernels.fused import cluster_mlp_mgpu as cm
rg = int(sys.argv.pop(1))
cm.ROWGROUPS = {256: rg, 512: rg}
from absl import app
from experiments import parity
app.run(parity.main)
