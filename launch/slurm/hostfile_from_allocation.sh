#!/usr/bin/env bash
# Write a hostfile ('HOST slots=N' per node) from the SLURM allocation this runs in:
#
#   launch/slurm/hostfile_from_allocation.sh OUT_FILE
#
# Nodes come from `scontrol show hostnames $SLURM_JOB_NODELIST` (in allocation order), slots
# from SLURM_TASKS_PER_NODE, whose compressed form "2(x3),1" means 2,2,2,1.
set -euo pipefail
out=${1:?usage: hostfile_from_allocation.sh OUT_FILE}
: "${SLURM_JOB_NODELIST:?not inside a SLURM allocation (SLURM_JOB_NODELIST is unset)}"
: "${SLURM_TASKS_PER_NODE:?SLURM_TASKS_PER_NODE is unset}"

mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
slots=()
IFS=, read -ra parts <<<"$SLURM_TASKS_PER_NODE"
for p in "${parts[@]}"; do
  if [[ $p =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
    for ((i = 0; i < BASH_REMATCH[2]; i++)); do slots+=("${BASH_REMATCH[1]}"); done
  elif [[ $p =~ ^[0-9]+$ ]]; then
    slots+=("$p")
  else
    echo "hostfile_from_allocation: cannot read SLURM_TASKS_PER_NODE=$SLURM_TASKS_PER_NODE" >&2
    exit 1
  fi
done
if [ "${#nodes[@]}" -ne "${#slots[@]}" ]; then
  echo "hostfile_from_allocation: ${#nodes[@]} nodes but ${#slots[@]} task counts" \
       "(SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST SLURM_TASKS_PER_NODE=$SLURM_TASKS_PER_NODE)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
: >"$out"
for i in "${!nodes[@]}"; do
  echo "${nodes[$i]} slots=${slots[$i]}" >>"$out"
done
