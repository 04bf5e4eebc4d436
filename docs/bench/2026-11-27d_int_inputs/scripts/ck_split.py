"""check_kernels' epoch family on the split-product cases only (int_inputs now by default)."""
import sys
from experiments import check_kernels as ck
from jaxshallow.run import cli
ck.EPOCH_CASES = [((784, 512, 10), 64, "sgd"), ((784, 1024, 10), 64, "sgd"), ((784, 256, 1024, 256, 10), 64, "sgd"),
                  ((784, 512, 256, 10), 64, "momentum"), ((784, 600, 300, 10), 50, "sgd"), ((784, 512, 10), 64, "adam")]
sys.argv = ["check_kernels", "--only=epoch", "--seed=7"]
cli.run(ck.main)
