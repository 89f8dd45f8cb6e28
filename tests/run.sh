#!/usr/bin/env bash
# The project's test command (README: `make test` runs the install, then this).
# Lint; single-process tests; then the multi-rank tests for real: tests/mpi (PyTorch's Horovod)
# and tests/mpi_tf (TensorFlow's) under `mpirun -np 2` and `horovodrun -np 2 --gloo`, and their
# np3-marked tests under `mpirun -np 3`.
# Each multi-rank pytest writes one junit file per rank into $REPORTS; every test has a hang
# timeout (tests/mpi_harness.py) and every launch an outer one, so a hang fails, never blocks.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TF_CPP_MIN_LOG_LEVEL=2 \
  PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
REPORTS=${HVDSCALE_TEST_REPORTS:-$PWD/reports}
export HVDSCALE_TEST_REPORTS=$REPORTS
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# Leave no trace (issue 49): everything the tests build (the offline bundle's Horovod wheel and
# build venv, simulated targets, pip's downloads, pytest's and Open MPI's temporary folders)
# goes under one scratch folder that is removed at the end, never the user's caches. Short
# path: Open MPI's and PMIx's sockets live under TMPDIR (108 bytes at most).
SCRATCH=$(mktemp -d /tmp/hvs-tests.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
# As /tmp is (sticky, everyone's): the shared-results tests act as a colleague (runuser), who
# must reach and make folders in it (mktemp's 0700 failed four of them).
chmod 1777 "$SCRATCH"
export TMPDIR=$SCRATCH HVDSCALE_CACHE=$SCRATCH/cache PIP_CACHE_DIR=$SCRATCH/pip
user_cache=${XDG_CACHE_HOME:-$HOME/.cache}/hvdscale
cache_before=$(find "$user_cache" 2>/dev/null | sort)
failed=()
phase() {
  local name=$1 start rc; shift
  echo "=== [$name] $*"
  start=$(date +%s)
  "$@"
  rc=$?
  # What each phase cost, as it ends, and in $REPORTS/phases.tsv (name, seconds, exit).
  start=$(( $(date +%s) - start ))
  echo "=== [$name] done in $start s (exit $rc)"
  printf '%s\t%s\t%s\n' "$name" "$start" "$rc" >>"$REPORTS/phases.tsv"
  # pytest's exit 5 (no tests collected) is a failure too: any non-zero exit is.
  if [ $rc -ne 0 ]; then
    echo "=== [$name] FAILED (exit $rc)"
    failed+=("$name")
    # A test cut by the hang timeout leaves its stack dump in a per-rank hang log, and a rank
    # that failed a test says so there first (the job may end before it reports).
    grep -l -e "Timeout" -e "^failed: " "$REPORTS"/hang-*.log 2>/dev/null | while read -r f; do
      echo "--- $f"; cat "$f"; done
  fi
}
PYTEST=(python -m pytest -p no:cacheprovider --color=no -q)
# The single phase on two pytest workers (pytest-xdist; issue 49): about half its time is
# spent waiting (launches starting, deadlines met, daemons), so a second worker fills the idle
# core. Each module runs whole on one worker, the longest first (tests/conftest.py).
# HVDSCALE_TEST_WORKERS=0 runs it in one process, in the suite's order.
WORKERS=${HVDSCALE_TEST_WORKERS:-2}
XDIST=()
[ "$WORKERS" = 0 ] || XDIST=(-n "$WORKERS" --dist loadgroup --no-loadscope-reorder)
phase lint ruff check .
# Every headline figure of bench/BENCHMARKS.md recomputed from its raw result in bench/results/.
phase benchmarks python tools/checks/check_benchmarks.py
# SLURM daemons, munge, sshd and iproute2 for the integration tests that start a real
# single-node SLURM and two hosts in network namespaces (apt, about 15 s once; then a no-op).
phase system-deps bash launch/ci_system_deps.sh
phase single "${PYTEST[@]}" "${XDIST[@]}" tests/unit tests/integration \
  --junitxml="$REPORTS/single.xml" \
  ${HVDSCALE_TEST_SELECT:+-k "$HVDSCALE_TEST_SELECT"}
# Issue 39: mutmut over the side channel's wire checks and the token-weighted reduction's slice
# (tools/mutation/bench_mutation.py, targets marked ci): a test that cannot fail there fails this phase.
phase mutation-slice timeout 900 nice -n 5 python tools/mutation/bench_mutation.py --ci --json ""
phase mpirun-np2 timeout 1200 mpirun -np 2 --tag-output "${PYTEST[@]}" tests/mpi
phase horovodrun-gloo-np2 timeout 1200 horovodrun -np 2 --gloo "${PYTEST[@]}" tests/mpi
phase mpirun-np3 timeout 900 mpirun -np 3 --oversubscribe --tag-output "${PYTEST[@]}" tests/mpi \
  -m np3
# PyTorch's own DDP (tests/mpi_ddp never starts Horovod; DDP needs an MPI launch, so no --gloo
# phase: tests/integration/test_faults.py checks that horovodrun --gloo refuses it).
phase mpirun-np2-ddp timeout 1200 mpirun -np 2 --tag-output "${PYTEST[@]}" tests/mpi_ddp
phase mpirun-np3-ddp timeout 900 mpirun -np 3 --oversubscribe --tag-output "${PYTEST[@]}" \
  tests/mpi_ddp -m np3
# torchrun on a target with PyTorch only (issue 64; tests/torchrun/no_mpi.sh: mpi4py and Horovod
# unimportable, no MPI launcher on PATH): DDP's exactness cases and the torchrun world on every
# rank, then `hvdscale run` under torchrun (runs, refusals, failed and killed ranks, Ctrl-C).
TORCHRUN=(python -m torch.distributed.run --nproc-per-node 2 --max-restarts 0)
phase torchrun-np2 timeout 300 tests/torchrun/no_mpi.sh "${TORCHRUN[@]}" -m pytest \
  -p no:cacheprovider --color=no -q tests/mpi_ddp/test_ddp_exactness.py tests/torchrun/ranks
phase torchrun-cli timeout 300 tests/torchrun/no_mpi.sh "${PYTEST[@]}" "${XDIST[@]}" \
  tests/torchrun/test_torchrun_cli.py --junitxml="$REPORTS/torchrun-cli.xml"
# The same launches for TensorFlow (tests/mpi_tf starts horovod.tensorflow: one runtime each).
phase mpirun-np2-tf timeout 1200 mpirun -np 2 --tag-output "${PYTEST[@]}" tests/mpi_tf
phase horovodrun-gloo-np2-tf timeout 1200 horovodrun -np 2 --gloo "${PYTEST[@]}" tests/mpi_tf
phase mpirun-np3-tf timeout 900 mpirun -np 3 --oversubscribe --tag-output "${PYTEST[@]}" \
  tests/mpi_tf -m np3
# TensorFlow's own MultiWorkerMirroredStrategy (tests/mpi_mwms never starts Horovod; its
# TF_CONFIG is agreed over MPI, so no --gloo phase: test_faults.py checks --gloo refuses it).
phase mpirun-np2-mwms timeout 900 mpirun -np 2 --tag-output "${PYTEST[@]}" tests/mpi_mwms
phase mpirun-np3-mwms timeout 900 mpirun -np 3 --oversubscribe --tag-output "${PYTEST[@]}" \
  tests/mpi_mwms -m np3
# What a run left in the user's cache (it may hold only what launch/install.sh put there).
left=$(comm -13 <(echo "$cache_before") <(find "$user_cache" 2>/dev/null | sort) | head -5)
if [ -n "$left" ]; then
  echo "=== [no-trace] FAILED: the tests wrote into $user_cache:"; echo "$left"
  failed+=("no-trace")
fi
python tests/summarize.py "$REPORTS" "${failed[@]}"
