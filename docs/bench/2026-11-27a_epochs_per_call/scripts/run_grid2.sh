#!/bin/bash
# The grid points that --epochs_per_call changes (the regression net's, the MLP's large batches),
# one process a point, as run_grid.sh; then the MLP's warm run with jax 0.11.2 (e2e, twice).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BUDGET=${BUDGET:-540} bash .device/run_grid.sh "$@"
