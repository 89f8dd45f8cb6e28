#!/usr/bin/env bash
# README's demo: a scaling sweep of the default small model at 1 and 2 ranks, in PyTorch and
# TensorFlow, under three strategies (one mpirun per round, rank count and framework, its
# points run one after another in it), in 2 interleaved rounds, so
# the report has a spread and paired ratios to judge its comparisons by (with one round it
# could only say there is no spread). It ends by printing the report, whose last line names
# its files: results/demo/report.md (the tables), results/demo/report.csv (every point, one
# row) and the PNG plot. Points already recorded there are skipped, so a second `make demo`
# only prints the report again (`--redo` measures again; `--repeats 3` adds a third round).
# Durations, measured on the project's 2-core Debian 12 VM (README, "How long each command
# takes"): the 2 rounds took 1 min 31 s in 8 launches, against 2 min 31 s with a launch per
# point (median of 3 paired runs, quiet machine, 2026-11-29; bench/results/demo_pair_issue53.json),
# so a cold `make demo` is the first install (5 min 09 s) plus about a minute and a half.
# As root, mpirun refuses to start without OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (Open MPI's guard against running jobs as root by mistake);
# the demo sets them for its own launches only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TF_CPP_MIN_LOG_LEVEL=2
OUT=${OUT:-results/demo}
hvdscale sweep configs/demo.yaml --np 1,2 --frameworks torch,tf \
  --strategies horovod,ps,independent --repeats 2 --out "$OUT" "$@"
