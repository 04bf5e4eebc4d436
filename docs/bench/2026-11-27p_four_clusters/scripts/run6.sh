#!/bin/bash
export PYTHONUNBUFFERED=1 PYTHONPATH=.
timeout 400 python3 .device/rg4.py lane 2>&1 | grep -v "^W\|^I0" | tail -14
