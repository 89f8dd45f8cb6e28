#!/usr/bin/env bash
# Thin horovodrun wrapper for hvdscale runs:
#
#   launch/horovodrun.sh -np 4 -hostfile hostfiles/two-nodes hvdscale run configs/nmt_torch.yaml
#
# What it adds to a plain horovodrun:
# - the hostfile is checked by hvdscale first (format, slots vs -np) and handed to horovodrun
#   as a clean copy: horovodrun's own reader fails on comment and blank lines;
# - --network-interfaces from HVDSCALE_NETWORK_INTERFACES (multi-host MPI mode needs an
#   interface of the same name on every host, or it probes for one);
# - binding: horovodrun's default (-bind-to none -map-by slot) unless HVDSCALE_BINDING_ARGS
#   gives other mpirun binding arguments;
# - root: OMPI_ALLOW_RUN_AS_ROOT{,_CONFIRM} (horovodrun adds --allow-run-as-root to its mpirun
#   itself). No -x is needed: horovodrun exports the whole environment to every rank.
# Everything else is passed to horovodrun unchanged.
set -euo pipefail
PYTHON=${PYTHON:-python3}

if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-1} TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

np="" hostfile="" clean=""
args=()
prev=""
for a in "$@"; do
  case "$prev" in
    -np|--num-proc) np=$a ;;
  esac
  case "$prev" in
    -hostfile|--hostfile)
      hostfile=$a
      clean=$(mktemp "${TMPDIR:-/tmp}/hvdscale-hostfile.XXXXXX")
      args+=("$clean"); prev=$a; continue ;;
  esac
  args+=("$a")
  prev=$a
done
trap '[ -z "$clean" ] || rm -f "$clean"' EXIT
if [ -n "$hostfile" ]; then
  "$PYTHON" -m hvdscale hostfile "$hostfile" ${np:+--np "$np"} >/dev/null || exit 2
  # Validated above, so dropping comments and blank lines is all the cleaning needed.
  sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$hostfile" | awk 'NF' >"$clean"
fi
extra=()
[ -z "${HVDSCALE_NETWORK_INTERFACES:-}" ] || extra+=(--network-interfaces "$HVDSCALE_NETWORK_INTERFACES")
[ -z "${HVDSCALE_BINDING_ARGS:-}" ] || extra+=(--binding-args "$HVDSCALE_BINDING_ARGS")
horovodrun "${extra[@]}" "${args[@]}"
