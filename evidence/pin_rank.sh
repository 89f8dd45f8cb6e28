#!/usr/bin/env bash
# Runs one rank of an mpirun launch pinned: the rank's process (its one compute thread and the
# rest) on core PIN_CORES[local rank]; Horovod's background thread, where there are spare cores,
# on a spare core of its own (HOROVOD_THREAD_AFFINITY). evidence/many_cores.sh places it last in
# `hvdscale sweep --launcher-args`, so mpirun starts `pin_rank.sh python -m hvdscale run ...`.
#   PIN_CORES   the usable core ids, comma-separated (many_cores.sh reads them from the machine)
#   PIN_MAX_NP  the largest rank count of the sweep: cores past it are the spare ones
#   PIN_PYTHON  the Python that pins where taskset is missing (default python3)
set -euo pipefail
lr=${OMPI_COMM_WORLD_LOCAL_RANK:-${PMIX_LOCAL_RANK:-0}}
IFS=, read -r -a cores <<<"${PIN_CORES:?PIN_CORES is not set}"
max=${PIN_MAX_NP:?PIN_MAX_NP is not set}
[ "$lr" -lt "${#cores[@]}" ] || { echo "pin_rank: local rank $lr has no core of its own" >&2; exit 1; }
spare=$(( ${#cores[@]} - max ))
if [ "$spare" -gt 0 ]; then
  # Horovod reads one core per local rank from this list.
  aff=()
  for ((i = 0; i < max; i++)); do aff+=("${cores[$(( max + i % spare ))]}"); done
  export HOROVOD_THREAD_AFFINITY=$(IFS=,; echo "${aff[*]}")
fi
if command -v taskset >/dev/null; then exec taskset -c "${cores[$lr]}" "$@"; fi
# No taskset (util-linux absent: the lent GPU machine had none): Python pins this process, then
# becomes the rank's command; the affinity is inherited across exec.
exec "${PIN_PYTHON:-python3}" -c 'import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
os.execvp(sys.argv[2], sys.argv[2:])' "${cores[$lr]}" "$@"
