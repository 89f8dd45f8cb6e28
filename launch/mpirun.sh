#!/usr/bin/env bash
# Thin mpirun wrapper for hvdscale runs (OpenMPI):
#
#   launch/mpirun.sh -np 2 [--hostfile hostfiles/localhost] hvdscale run configs/demo.yaml [...]
#
# What it adds to a plain mpirun:
# - binding: --bind-to none --map-by slot (as horovodrun does), so a rank's compute thread and
#   its Horovod/MPI progress threads share the host's cores; HVDSCALE_BIND_TO / HVDSCALE_MAP_BY
#   override (e.g. HVDSCALE_BIND_TO=core);
# - -x of what remote ranks need (PATH, LD_LIBRARY_PATH, PYTHONPATH, VIRTUAL_ENV, ...) and of
#   every HOROVOD_*, HVDSCALE_* and NCCL_* variable: mpirun starts remote ranks over ssh with
#   the login's environment, not this shell's;
# - root: --allow-run-as-root plus OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM} when run as root;
# - the hostfile, if one is given, is checked by hvdscale first (format, slots vs -np).
# Everything else is passed to mpirun unchanged.
set -euo pipefail
PYTHON=${PYTHON:-python3}

args=(--bind-to "${HVDSCALE_BIND_TO:-none}" --map-by "${HVDSCALE_MAP_BY:-slot}")
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  args+=(--allow-run-as-root)
fi
export PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-1} TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
for v in PATH LD_LIBRARY_PATH PYTHONPATH PYTHONUNBUFFERED VIRTUAL_ENV PYENV_VERSION CONDA_PREFIX \
         TF_CPP_MIN_LOG_LEVEL $(compgen -e | grep -E '^(HOROVOD_|HVDSCALE_|NCCL_)' || true); do
  [ -n "${!v+x}" ] && args+=(-x "$v")
done

# Find -np and the hostfile among the arguments, to check them before launching.
np="" hostfile=""
prev=""
for a in "$@"; do
  case "$prev" in
    -np|-n|--np|-c) np=$a ;;
    -hostfile|--hostfile|-machinefile|--machinefile) hostfile=$a ;;
  esac
  case "$a" in
    --hostfile=*|-hostfile=*) hostfile=${a#*=} ;;
    --np=*) np=${a#*=} ;;
  esac
  prev=$a
done
if [ -n "$hostfile" ]; then
  "$PYTHON" -m hvdscale hostfile "$hostfile" ${np:+--np "$np"} >/dev/null || exit 2
fi
exec mpirun "${args[@]}" "$@"
