set -u
export PYTHONPATH=. JAXSHALLOW_DATA_DIR=$PWD/.data/data XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=docs/bench/2026-12-06b_h100/scripts
timeout 150 python3 $S/fixed_loads.py 256:64:bfloat16 256:64:tf32 2>&1 | grep -v Warning | tee $OUT/fixed_loads.txt
timeout 300 bash $S/cold.sh 3 2>&1 | tee $OUT/cold.txt
