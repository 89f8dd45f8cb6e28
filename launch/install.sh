#!/usr/bin/env bash
# Idempotent install of hvdscale and its real stack on Debian 12 / Python 3.11:
# OpenMPI (Debian), PyTorch 2.13.0 CPU, tensorflow-cpu 2.21, mpi4py, and Horovod 0.28.1
# built from its source distribution with PyTorch, TensorFlow, MPI and Gloo.
# Everything goes into the Python that runs this ($PYTHON, default python3) with pip: no
# virtual environment is made (activate one first to keep the stack apart); hvdscale itself is
# installed editable from this checkout.
#
# Horovod 0.28.1 (its last release) does not build as published against these versions;
# two fixes are applied to the unpacked source before building (see docs/install.md, "Why
# Horovod is patched"). The built wheel is cached under $HVDSCALE_CACHE keyed by the torch,
# tensorflow and horovod versions, so a second install skips the build.
# Measured on the project's 2-core Debian 12 VM (README, "How long each command takes"):
# the first install 5 min 09 s (3 min 52 s of it the Horovod build; 2026-11-27, load ~2),
# again 97 s (2026-11-27, load 13-16: pip's checks and importing torch and TensorFlow).
#
# GPU clusters: set TORCH_SPEC / TF_SPEC to CUDA builds and HOROVOD_GPU_OPERATIONS=NCCL
# (plus HOROVOD_NCCL_HOME if NCCL is not in a system path) before running this script; the
# cache key includes those values so CPU and GPU wheels never mix.
set -euo pipefail

PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TF_SPEC=${TF_SPEC:-tensorflow-cpu==2.21.0}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
HVDSCALE_CACHE=${HVDSCALE_CACHE:-$HOME/.cache/hvdscale}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "install: ERROR: $*" >&2; exit 1; }
say() { echo "install: $*"; }

# A machine without network: install an offline bundle (launch/bundle.sh, docs/offline.md)
# into the target's Python ($PYTHON) instead of everything below.
if [ "${1:-}" = "--offline" ]; then
  [ -n "${2:-}" ] || die "--offline needs a bundle folder (made by launch/bundle.sh build)"
  PYTHON=$PYTHON exec bash "$REPO/launch/bundle.sh" install "$2"
fi
[ $# -eq 0 ] || die "unknown argument '$1' (usage: launch/install.sh [--offline BUNDLE_DIR])"

# --- preconditions: one clear line naming what is missing -------------------------------
command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH (Python 3.11 is required)"
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$pyver" = "3.11" ] || die "Python 3.11 is required (found $pyver at $(command -v "$PYTHON"))"
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "pip is not available for $PYTHON"

# --- system packages ------------------------------------------------------------------------
need_apt=()
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin)
[ -e /usr/include/x86_64-linux-gnu/openmpi/mpi.h ] || [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] \
  || need_apt+=(libopenmpi-dev)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
if [ ${#need_apt[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "apt-get is unavailable; install ${need_apt[*]} by hand"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  say "apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null \
    || die "apt-get install ${need_apt[*]} failed"
fi

# --- Python packages ------------------------------------------------------------------------
pip() { "$PYTHON" -m pip "$@"; }
say "pip install $TORCH_SPEC $TF_SPEC and tools"
pip install -q "$TORCH_SPEC" "$TF_SPEC" "mpi4py>=4.0" "pyyaml>=6" "msgspec>=0.19" "numpy" "scipy" "matplotlib" \
  "cloudpickle" "psutil" "packaging" "cffi" "setuptools" "wheel" "pytest" "pytest-xdist" "ruff" \
  "jsonschema" \
  "mutmut==2.5.1" "whatthepatch==1.0.7" \
  || die "pip install of the framework stack failed"

# --- Horovod: cached wheel, or build from the sdist with the two fixes ------------------------
torch_v=$("$PYTHON" -c 'import torch; print(torch.__version__)')
tf_v=$("$PYTHON" -c 'import importlib.metadata as m
for d in ("tensorflow-cpu", "tensorflow"):
    try:
        print(m.version(d)); break
    except m.PackageNotFoundError:
        pass')
# GPU builds: the NCCL and CUDA locations are part of the key too (a wheel built against one
# NCCL must not be reused with another); torch's version already names its CUDA (+cu12x).
gpu_tag="${HOROVOD_GPU_OPERATIONS:-none}"
if [ -n "${HOROVOD_GPU_OPERATIONS:-}${HOROVOD_GPU_ALLREDUCE:-}" ]; then
  gpu_tag="$gpu_tag-$(printf '%s|%s|%s' "${HOROVOD_GPU_ALLREDUCE:-}" "${HOROVOD_NCCL_HOME:-}" \
    "${CUDA_HOME:-}" | sha1sum | cut -c1-10)"
fi
key="horovod-${HOROVOD_VERSION}_torch-${torch_v}_tf-${tf_v}_py-${pyver}_gpu-${gpu_tag}"
wheel_dir="$HVDSCALE_CACHE/wheels/$key"

horovod_ok() {
  "$PYTHON" - <<'PY' >/dev/null 2>&1
import os
import horovod.torch as ht, horovod.tensorflow as htf
assert ht.mpi_built() and ht.gloo_built() and htf.mpi_built() and htf.gloo_built()
assert not os.environ.get("HOROVOD_GPU_OPERATIONS") or ht.nccl_built()
PY
}

installed_v=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("horovod"))' 2>/dev/null || true)
if [ "$installed_v" = "$HOROVOD_VERSION" ] && horovod_ok; then
  say "horovod $HOROVOD_VERSION already installed and built with torch, tensorflow, MPI, Gloo"
else
  if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
    log=$(mktemp /tmp/hvdscale-horovod-build.XXXXXX.log)
    say "building horovod $HOROVOD_VERSION from source (about 4 minutes on 2 quiet cores); log: $log"
    # The GPU variables (HOROVOD_GPU_OPERATIONS, HOROVOD_NCCL_HOME, CUDA_HOME, ...) are
    # exported by the caller and reach Horovod's build through this environment.
    [ -z "${HOROVOD_GPU_OPERATIONS:-}" ] || say "GPU build: HOROVOD_GPU_OPERATIONS=$HOROVOD_GPU_OPERATIONS" \
      "HOROVOD_NCCL_HOME=${HOROVOD_NCCL_HOME:-<system>} CUDA_HOME=${CUDA_HOME:-<nvcc on PATH>}"
    # The download, the fixes and the build are shared with launch/bundle.sh.
    # shellcheck source=launch/horovod_build.sh
    source "$REPO/launch/horovod_build.sh"
    HOROVOD_WITH_TENSORFLOW=1 hvd_build_wheel "$PYTHON" "$HOROVOD_VERSION" "$wheel_dir" "$log" \
      || die "horovod build failed (log: $log)"
    whl=$(ls "$wheel_dir"/horovod-*.whl)
    say "cached $(basename "$whl") in $wheel_dir"
  else
    say "using cached horovod wheel from $wheel_dir"
  fi
  pip install -q --force-reinstall --no-deps "$wheel_dir"/horovod-*.whl || die "installing the horovod wheel failed"
fi

# --- hvdscale itself ------------------------------------------------------------------------
pip install -q --no-deps --no-build-isolation -e "$REPO" || die "pip install -e $REPO failed"

# --- verify: fail loudly, and never leave a Horovod that lacks a framework -------------------
check=$(horovodrun --check-build 2>&1) || true
missing=()
wants=("\[X\] TensorFlow" "\[X\] PyTorch" "\[X\] MPI" "\[X\] Gloo")
# Asked for GPU operations: the wheel must show NCCL, else it would silently allreduce GPU
# tensors through host copies.
[ -z "${HOROVOD_GPU_OPERATIONS:-}" ] || wants+=("\[X\] NCCL")
for want in "${wants[@]}"; do
  echo "$check" | grep -q "$want" || missing+=("${want#\\[X\\] }")
done
if [ ${#missing[@]} -gt 0 ]; then
  pip uninstall -y -q horovod || true
  rm -rf "$wheel_dir"
  echo "$check" >&2
  die "horovodrun --check-build lacks: ${missing[*]}; horovod was uninstalled and its cached wheel removed"
fi
say "ok: horovodrun --check-build shows TensorFlow, PyTorch, MPI and Gloo${HOROVOD_GPU_OPERATIONS:+ and NCCL}"
