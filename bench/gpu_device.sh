#!/usr/bin/env bash
# Issue 31's GPU checks in one prepared script, for a machine with one NVIDIA GPU and no network
# (the lent H100/H200 machine, or a cluster's compute node):
#
#   bash bench/gpu_device.sh BUNDLE OUT        (STAGES=check,strategies,... to run a subset)
#
# BUNDLE is the offline bundle built for the target's Python and torch (docs/offline.md, target
# (b): Open MPI's wheel and a Horovod built with NCCL); OUT receives every raw result, each
# naming the GPU, driver, CUDA, cuDNN, NCCL and torch versions (machine.json and the records).
# Stages, each under its own time limit so one that hangs cannot eat the others' time; about
# 8 minutes in all on an H100 (estimated from the CPU timings: none has run on a GPU yet):
#   check       bench/gpu_check.sh: fused/loop at np=1 and 2 on the GPU, cuDNN kernels seen for
#               fused only, synchronised timing
#   strategies  horovod, ps, ddp, independent, fused and loop, np=1 and 2 (both ranks share
#               the GPU: Horovod's NCCL is refused there by design, naming the fix)
#   exact       the exactness tests with each rank's replica on the GPU, TF32 off, np=2
#   seeds       configs/nmt_torch.yaml (seeds 000/001) fused vs loop, np=1, tf32 off and on
#   profile     kernels and operators per step, fused vs loop, on the GPU
#   gemm        hvdscale gemm --device cuda, M=K 512..2560, N 1..256, fp32/tf32/bf16
#   batch       per-rank batch where words/s stops growing, fused and loop
# Without a GPU it fails with one line (exit 2) before anything is installed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
die() { echo "gpu_device: ERROR: $*" >&2; exit 2; }
[ $# -eq 2 ] || die "usage: bash bench/gpu_device.sh BUNDLE OUT"
BUNDLE=$1 OUT=$2
"$PY" - <<'PY' || exit 2
import os, sys
try:
    import torch
except ImportError:
    sys.exit(f"gpu_device: ERROR: {sys.executable} has no torch")
if not torch.cuda.is_available():
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    sys.exit("gpu_device: ERROR: no GPU visible to torch (CUDA_VISIBLE_DEVICES="
             f"{'unset' if cvd is None else repr(cvd)}): run this on a machine with a GPU")
PY
[ -e "$BUNDLE" ] || die "no bundle at $BUNDLE (build one: launch/bundle.sh, docs/offline.md)"
mkdir -p "$OUT" || die "cannot create $OUT"
if [ -f "$BUNDLE" ]; then  # the tarball launch/bundle.sh makes: unpack it beside the results
  tar -xzf "$BUNDLE" -C "$OUT" || die "cannot unpack $BUNDLE"
  BUNDLE="$OUT/$(basename "$BUNDLE" .tar.gz)"
  [ -d "$BUNDLE" ] || die "$1 did not unpack to $(basename "$BUNDLE")"
fi
STAGES=",${STAGES:-install,check,strategies,exact,seeds,profile,gemm,batch},"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
export OMPI_MCA_btl=self,tcp   # a small /dev/shm must not stop two ranks on one host
failed=()
stage() {  # stage NAME LIMIT_S CMD...: runs when asked, logs to OUT/NAME.log, never blocks
  local name=$1 limit=$2; shift 2
  case "$STAGES" in *",$name,"*) ;; *) return 0 ;; esac
  echo "== $name (limit ${limit}s) $(date -u +%T)"
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { failed+=("$name:$rc"); echo "   $name failed ($rc); tail of $OUT/$name.log:"; tail -5 "$OUT/$name.log"; }
}

stage install 120 bash launch/install.sh --offline "$BUNDLE"
"$PY" - "$OUT/machine.json" <<'PY'
import json, os, platform, subprocess, sys
import torch
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_mode",
                      "--format=csv,noheader"], capture_output=True, text=True)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if "model name" in l), None)
mem = next((int(l.split()[1]) // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), None)
json.dump({"gpu": smi.stdout.strip(), "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "nccl": ".".join(map(str, torch.cuda.nccl.version())),
           "torch": torch.__version__, "python": platform.python_version(), "cores": os.cpu_count(),
           "cpu": cpu, "memory_mb": mem, "loadavg": os.getloadavg()}, open(sys.argv[1], "w"), indent=1)
PY
H=(python -m hvdscale)
SHORT=(--set measure.warmup_steps=5 --set measure.steps=20 --set tf32=off)
stage check 150 bash bench/gpu_check.sh --out "$OUT/gpu_check.json"
strategies() {
  for impl in fused loop; do
    "${H[@]}" sweep configs/demo.yaml --np 1,2 --frameworks torch --strategies horovod,ps,ddp,independent \
      --set device=cuda --set model.rnn_impl=$impl "${SHORT[@]}" --out "$OUT/strategies" --timeout 90 --no-plot
  done
}
stage strategies 200 strategies
stage exact 120 env HVDSCALE_TEST_DEVICE=cuda mpirun -np 2 --oversubscribe python -m pytest -q \
  -p no:cacheprovider tests/mpi/test_exactness.py tests/mpi_ddp/test_ddp_exactness.py -k "not fp16"
seeds() {
  for tf32 in off on; do
    for cfg in configs/nmt_torch.yaml configs/nmt_torch_loop.yaml; do
      "${H[@]}" run "$cfg" --set device=cuda --set tf32=$tf32 --set measure.warmup_steps=5 \
        --set measure.steps=15 --out "$OUT/seeds" --quiet
    done
  done
}
stage seeds 150 seeds
stage profile 90 "${H[@]}" profile configs/nmt_torch.yaml --set device=cuda --set tf32=off \
  --set data.synthetic.sentences_per_rank=1536 --steps 2 --out "$OUT/profile"
stage gemm 90 "${H[@]}" gemm --device cuda --hidden 512,1024,1536,2048,2560 \
  --precision fp32,tf32,bf16 --repeats 3 --min-time 0.005 --peak-size 8192 --out "$OUT/gemm"
batch() {
  for impl in fused loop; do
    "${H[@]}" batch configs/nmt_torch.yaml --batch 64,128,256,384,512 --set device=cuda \
      --set model.rnn_impl=$impl "${SHORT[@]}" --out "$OUT/batch_$impl" --timeout 60
  done
}
stage batch 120 batch
"$PY" -m hvdscale.study.stepcost.gpu_limit "$OUT" > "$OUT/limit.md" 2>&1 || failed+=("limit")
echo "== done $(date -u +%T); results in $OUT${failed[*]:+; failed: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
