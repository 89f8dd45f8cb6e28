# Sourced (not run) by launch/install.sh and launch/bundle.sh: Horovod 0.28.1 built from its
# source distribution with the fixes it needs against current PyTorch and TensorFlow.
#
#   hvd_build_wheel PYTHON VERSION OUT_DIR LOG
#
# downloads the sdist with PYTHON's pip (or takes $HVD_SDIST, a local .tar.gz, for a build
# without network), applies the fixes, and builds one wheel into OUT_DIR. Which frameworks, MPI,
# Gloo and GPU operations it gets is the caller's: the HOROVOD_* variables in the environment
# reach Horovod's setup.py unchanged (HOROVOD_WITH_* default to what install.sh always built).
# The caller reports failures: it returns non-zero with the reason on stderr.

# Fix 1: PyTorch >= 2.1 and TensorFlow's bundled abseil need C++17; 0.28.1 pins C++14.
# Fix 2: xla_mpi_ops.cc needs XLA headers tensorflow 2.21 no longer ships (GPU XLA only).
# Fix 3 (gcc 13 only): headers 0.28.1 forgot to include (fixed upstream after the release).
hvd_patch_source() {
  local src=$1 f
  for f in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
    sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' "$f"
    grep -q 'CMAKE_CXX_STANDARD 17' "$f" || { echo "C++17 patch did not apply to $f" >&2; return 1; }
  done
  sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
  if grep -q 'xla_mpi_ops.cc' "$src/horovod/tensorflow/CMakeLists.txt"; then
    echo "XLA patch did not apply" >&2; return 1
  fi
}

hvd_build_wheel() {
  local python=$1 version=$2 out=$3 log=$4 build src gcc_major
  build=$(mktemp -d /tmp/hvdscale-horovod-build.XXXXXX)
  if [ -n "${HVD_SDIST:-}" ]; then
    cp "$HVD_SDIST" "$build/" || return 1
  elif ! "$python" -m pip download -q --no-deps --no-binary :all: "horovod==$version" \
      -d "$build" >>"$log" 2>&1; then
    echo "could not download the horovod $version source distribution (log: $log)" >&2
    return 1
  fi
  tar -xzf "$build"/horovod-"$version".tar.gz -C "$build" || return 1
  src="$build/horovod-$version"
  hvd_patch_source "$src" || return 1
  gcc_major=$(gcc -dumpversion 2>/dev/null | cut -d. -f1)
  local cxxflags=${CXXFLAGS:-}
  if [ "${gcc_major:-0}" -ge 13 ]; then
    cxxflags="$cxxflags -include stdexcept -include string -include cstdint"
  fi
  mkdir -p "$build/dist" "$out"
  # CMake 4 refuses gloo's cmake_minimum_required(2.8.12) without a policy minimum.
  ( cd "$src" && \
    HOROVOD_WITH_PYTORCH=${HOROVOD_WITH_PYTORCH-1} HOROVOD_WITH_MPI=${HOROVOD_WITH_MPI-1} \
    HOROVOD_WITH_GLOO=${HOROVOD_WITH_GLOO-1} HOROVOD_WITHOUT_MXNET=1 \
    CMAKE_POLICY_VERSION_MINIMUM=${CMAKE_POLICY_VERSION_MINIMUM:-3.5} CXXFLAGS="$cxxflags" \
    MAKEFLAGS="${MAKEFLAGS:--j$(nproc)}" \
    "$python" -m pip wheel -v --no-build-isolation --no-deps . -w "$build/dist" ) >>"$log" 2>&1 \
    || { echo "horovod build failed (log: $log)" >&2; return 1; }
  local whl
  whl=$(ls "$build"/dist/horovod-*.whl) || return 1
  # Copy then rename so an interrupted copy never leaves a wheel that looks complete.
  cp "$whl" "$out/.$(basename "$whl").part" \
    && mv "$out/.$(basename "$whl").part" "$out/$(basename "$whl")" || return 1
  rm -rf "$build"
}
