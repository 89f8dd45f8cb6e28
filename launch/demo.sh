#!/usr/bin/env bash
# README's demo: a scaling sweep of the default small model at 1 and 2 ranks, in PyTorch and
# TensorFlow, under three strategies (one mpirun per round, rank count and framework, its
# points run one after another in it), measured until decided (`--decide --budget 150s`): 3
# interleaved rounds, then rounds only for the points of the comparisons still undecided, while
# the budget holds one, so the report's verdicts rest on paired rounds (at least 3 a verdict).
# It ends by printing the report, whose last line names its files: results/demo/report.md (the
# tables), results/demo/report.csv (every point, one row) and the PNG plot. Points already
# recorded there are skipped, so a second `make demo` goes on from the rounds recorded (and
# prints the report; `--redo` measures again).
# Durations, measured on the project's 2-core Debian 12 VM (README, "How long each command
# takes"; bench/results/demo_decide.json): 2 min 34 s (147-158 s, 3 runs, 4 rounds each)
# against 1 min 23 s for 2 plain rounds (80-85 s), paired, load 1.0-2.0, 2026-12-02; so a cold
# `make demo` is the first install (5 min 09 s) plus about two and a half minutes.
# As root, mpirun refuses to start without OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (Open MPI's guard against running jobs as root by mistake);
# the demo sets them for its own launches only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TF_CPP_MIN_LOG_LEVEL=2
OUT=${OUT:-results/demo}
hvdscale sweep configs/demo.yaml --np 1,2 --frameworks torch,tf \
  --strategies horovod,ps,independent --decide --budget 150s --out "$OUT" "$@"
