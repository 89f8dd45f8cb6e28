#!/usr/bin/env bash
# Run a command as on a target with PyTorch and hvdscale only: mpi4py and Horovod unimportable
# (tests/torchrun/nompi first on PYTHONPATH) and no MPI launcher on PATH (every other program
# of PATH through a folder of links; /usr/bin holds mpirun beside everything else, so no
# folder can simply be dropped). tests/run.sh's torchrun phase: tests/torchrun/no_mpi.sh CMD...
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$(command -v python3)
python=$("$python" -c 'import sys; print(sys.executable)')  # not a pyenv shim: PATH changes
bin=$(mktemp -d "${TMPDIR:-/tmp}/nompi-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
"$python" - "$bin" "$(dirname "$python"):$PATH" <<'PY'
import os, re, sys
bin_dir, path = sys.argv[1], sys.argv[2]
launcher = re.compile(r"^(mpirun.*|mpiexec.*|orterun|prterun|oshrun|horovodrun|mpicc|mpicxx)$")
for d in path.split(":"):
    if not os.path.isdir(d):
        continue
    for name in os.listdir(d):
        f, link = os.path.join(d, name), os.path.join(bin_dir, name)
        if launcher.match(name) or os.path.lexists(link) or not os.access(f, os.X_OK):
            continue
        os.symlink(f, link)
PY
ln -sf "$python" "$bin/python"
ln -sf "$python" "$bin/python3"
export PATH=$bin PYTHONPATH=$here/nompi:$root${PYTHONPATH:+:$PYTHONPATH}
export HVDSCALE_TORCHRUN_PHASE=1 OMP_NUM_THREADS=1
"$@"
