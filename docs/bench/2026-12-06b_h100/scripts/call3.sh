set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data
timeout 450 python3 -m experiments.check_kernels --only=cluster_mlp --seed=1 2>&1 | grep -v "Warning\|warn(" > $OUT/check_cluster_mlp.log
echo "rc $?"; tail -25 $OUT/check_cluster_mlp.log
