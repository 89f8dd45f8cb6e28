#!/usr/bin/env bash
# README's demo: the default small model at 1 and 2 ranks under all three strategies, then the
# report (tables printed, PNG plots written) from results/demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TF_CPP_MIN_LOG_LEVEL=2
OUT=${OUT:-results/demo}
for np in 1 2; do
  for s in independent horovod ps; do
    timeout 300 mpirun -np "$np" hvdscale run configs/demo.yaml --set strategy.name="$s" --out "$OUT"
  done
done
hvdscale report "$OUT" --plot
