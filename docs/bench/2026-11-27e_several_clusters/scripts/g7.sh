#!/bin/bash
# Call 7: the grid's short points again with the bench's new repeats (runs up to 0.1 s).
export JAXSHALLOW_DATA_DIR=$PWD/.data PYTHONUNBUFFERED=1 PYTHONPATH=.
ALT="" BUDGET=200 bash .device/run_grid.sh "regression small" "regression medium"
