set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# Main with layout_search: "fixed" is the checkout's pallas path as it is.
timeout 400 bash docs/bench/2026-12-06b_h100/scripts/cold.sh 5 "xla fixed" 2>&1 | tee $OUT/cold.txt
