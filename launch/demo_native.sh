#!/usr/bin/env bash
# The second demo (`make demo-native`): Horovod beside each framework's own data parallelism,
# PyTorch DDP and TensorFlow's MultiWorkerMirroredStrategy, at 1 and 2 ranks on the demo model.
# Kept apart from `make demo` so that one stays under 3 minutes after the install. A native
# strategy runs only with its own framework; the sweep pairs them so. Points already recorded
# in results/demo_native are skipped (`--redo` measures again).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TF_CPP_MIN_LOG_LEVEL=2
OUT=${OUT:-results/demo_native}
hvdscale sweep configs/demo.yaml --np 1,2 --frameworks torch,tf \
  --strategies horovod,ddp,mwms,independent --out "$OUT" "$@"
