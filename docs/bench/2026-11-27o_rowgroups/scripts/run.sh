#!/bin/bash
cd .rg
export PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 150 python3 rg_leaves.py lane 2>&1 | grep -v "^W\|^I0" | tail -12
timeout 200 python3 rg.py lane 2>&1 | grep -v "^W\|^I0" | tail -12
