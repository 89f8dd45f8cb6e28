#!/usr/bin/env bash
# The GPU path end to end, with one command on a machine with a GPU (see evidence/gpu_check.py):
#   bash evidence/gpu_check.sh [--out FILE]      (PYTHON=... to pick the interpreter)
# Fails with one clear line (exit 2) where no GPU is visible.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" evidence/gpu_check.py "$@"
