#!/usr/bin/env bash
# Issue 31's GPU checks in one prepared script, for a machine with one NVIDIA GPU and no network
# (the lent H100/H200 machine, or a cluster's compute node):
#
#   bash evidence/gpu_device.sh [--rehearse-cpu] BUNDLE OUT   (STAGES=check,strategies,... for a subset)
#
# BUNDLE is the offline bundle built for the target's Python and torch (docs/offline.md, target
# (b): Open MPI's wheel and a Horovod built with NCCL); it is installed into $PYTHON (default
# python3) and everything runs with that Python, from any directory. OUT receives every raw
# result, each naming the GPU, driver, CUDA, cuDNN, NCCL and torch versions (machine.json and
# the records). Stages, in this order (of value, issue 43), each a process of its own under its
# own time limit, so one that hangs cannot eat the others' time; BUDGET_S bounds them all:
#   check       evidence/gpu_check.py: fused/loop at np=1 on the GPU, np=2 with ddp (gloo) on the
#               shared GPU, cuDNN kernels seen for fused only, synchronised timing
#   seeds       configs/nmt_torch.yaml (seeds 000/001), np=1, IMPLS x PRECISIONS (default
#               fused,loop,compiled x fp32,tf32,bf16)
#   profile     kernels and operators per step, fused/loop/compiled, per PROFILE_PRECISIONS
#   strategies  horovod, ps, ddp, independent at np=1; np=2 on one GPU without horovod (its NCCL
#               refuses two ranks on one GPU, by design: said in the log); STRAT_IMPLS (fused,
#               loop) x STRAT_PRECISIONS (fp32, bf16)
#   exact       the exactness tests with each rank's replica on the GPU, TF32 off, np=2
#   batch       per-rank batch where words/s stops growing, STRAT_IMPLS
#   gemm        hvdscale gemm --device cuda, K 256..2048 (M = 4K), N 1..512, fp32/tf32/bf16
#   limit       the limit table (limit.md) from seeds and gemm
# Without a GPU it fails with one line (exit 2) before anything is installed.
#
# --rehearse-cpu runs every stage's own code path on the CPU with tiny sizes (CI does, in a
# simulated target: tests/integration/test_first_contact.py). Its results are no GPU figures:
# OUT/REHEARSAL says so, machine.json has "rehearsal": "cpu" and no GPU, and gpu_check's JSON
# and limit.md carry the same label.
set -uo pipefail
die() { echo "gpu_device: ERROR: $*" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)

# --- the stages: each is run as `bash gpu_device.sh --stage NAME` under `timeout` -------------
# Lists (comma-separated env overrides): IMPLS for seeds and batch, PRECISIONS for seeds,
# PROFILE_PRECISIONS for profile, STRAT_IMPLS (strategies and batch) and STRAT_PRECISIONS.
DEV=cuda TINY=() impls=fused,loop,compiled precs=fp32,tf32,bf16 prof=fp32,tf32,bf16
s_impls=fused,loop s_precs=fp32,bf16
if [ "${REHEARSE:-}" = cpu ]; then  # the CPU has fp32 and bf16 only (tf32 is refused there)
  DEV=cpu impls=fused precs=fp32,bf16 prof=fp32 s_impls=fused s_precs=fp32
  TINY=(--set model.embed_dim=32 --set model.hidden_size=32 --set model.encoder_layers=1
        --set model.decoder_layers=1 --set model.src_vocab=300 --set model.tgt_vocab=300
        --set data.batch_size=8 --set data.synthetic.max_len=10
        --set data.synthetic.sentences_per_rank=64)
fi
# Arrays under names of their own: an exported list turned into an array would reach the
# stages' own processes as its first element only.
IFS=, read -r -a IMPL_LIST <<<"${IMPLS:-$impls}"
IFS=, read -r -a PREC_LIST <<<"${PRECISIONS:-$precs}"
IFS=, read -r -a PROF_LIST <<<"${PROFILE_PRECISIONS:-$prof}"
IFS=, read -r -a S_IMPL_LIST <<<"${STRAT_IMPLS:-$s_impls}"
IFS=, read -r -a S_PREC_LIST <<<"${STRAT_PRECISIONS:-$s_precs}"
cpu_lstm() {  # fails, saying why, if this CPU's fused LSTM refuses precision $1
  "${PY:-python3}" -c 'import sys; from hvdscale.frameworks.torch.precision import cpu_lstm_refusal
why = cpu_lstm_refusal(sys.argv[1]); print(why or ""); sys.exit(1 if why else 0)' "$1"
}
tf32_of() { [ "$1" = tf32 ] && echo on || echo off; }  # records name TF32 whatever the precision
H=("${PY:-python3}" -m hvdscale)
STEPS=(--set measure.warmup_steps=5 --set measure.steps=20)
[ "$DEV" = cuda ] || STEPS=(--set measure.warmup_steps=1 --set measure.steps=3)
st_install() { PYTHON=$PY bash launch/bundle.sh install "$BUNDLE"; }
st_check() { PYTHON=$PY bash evidence/gpu_check.sh ${REHEARSE:+--rehearse-cpu} --out "$OUT/gpu_check.json"; }
st_strategies() {
  # One GPU: every strategy at np=1; at np=2 both ranks share it, where Horovod's NCCL refuses
  # (hvdscale says so and names ddp or ps): np=2 runs the strategies that work there.
  local impl p one=horovod,ps,ddp,independent two=ps,ddp,independent
  [ "$DEV" = cuda ] || one=horovod two=ps,ddp  # the rehearsal: each code path once
  echo "np=2 without horovod: the ranks share one GPU (Horovod's NCCL refuses that)"
  for p in "${S_PREC_LIST[@]}"; do
    for impl in "${S_IMPL_LIST[@]}"; do
      local set=(--set device=$DEV --set model.rnn_impl=$impl --set precision=$p --set tf32=$(tf32_of $p))
      "${H[@]}" sweep configs/demo.yaml --np 1 --frameworks torch --strategies $one "${set[@]}" \
        "${STEPS[@]}" "${TINY[@]}" --out "$OUT/strategies" --timeout 90 --no-plot \
        && "${H[@]}" sweep configs/demo.yaml --np 2 --frameworks torch --strategies $two "${set[@]}" \
        "${STEPS[@]}" "${TINY[@]}" --out "$OUT/strategies" --timeout 90 --no-plot \
        || return
    done
  done
}
st_exact() {
  local sel="not fp16"
  [ "$DEV" = cuda ] || sel="not fp16 and (staged or ddp_matches)"  # a few, the same code path
  # Both ranks share one GPU here, where Horovod built with NCCL refuses to run: its cases skip.
  # The summary (one line per strategy, and exact_summary.json) shows how many each really ran;
  # the skip is allowed for horovod only, so any other strategy running nothing fails the stage.
  HVDSCALE_EXACTNESS_ALLOW_UNRUN=${HVDSCALE_EXACTNESS_ALLOW_UNRUN-horovod} \
  HVDSCALE_EXACTNESS_SUMMARY="$OUT/exact_summary.json" \
  HVDSCALE_TEST_DEVICE=$DEV "$PY" -m hvdscale.study.sweep.launcher --np 2 \
    --launcher-args=--oversubscribe -- "$PY" -m pytest -q -p no:cacheprovider \
    tests/mpi/test_exactness.py tests/mpi_ddp/test_ddp_exactness.py -k "$sel"
}
st_seeds() {
  # The seeds' model at each precision and RNN implementation; a failed run is said and the
  # rest still run (one precision missing must not cost the others).
  # Implementation outermost: fused and loop at every precision come before the compiled loop,
  # whose first step compiles (a stage cut at its limit keeps the rows the limit table needs).
  local p impl bad=0 why
  for impl in "${IMPL_LIST[@]}"; do
    for p in "${PREC_LIST[@]}"; do
      # On a CPU, oneDNN may lack a bf16 LSTM (hvdscale refuses it in one line): the rehearsal
      # leaves that run out and says so, as a GPU has no such gap.
      if [ "$DEV" = cpu ] && [ "$impl" = fused ] && ! why=$(cpu_lstm "$p"); then
        echo "seeds: $p $impl left out: $why"; continue
      fi
      echo "seeds: $p $impl $(date -u +%T)"
      "${H[@]}" run configs/nmt_torch.yaml --set device=$DEV --set model.rnn_impl=$impl \
        --set precision=$p --set tf32=$(tf32_of $p) "${TINY[@]}" \
        --set measure.warmup_steps="${SEED_WARMUP:-5}" --set measure.steps="${SEED_STEPS:-15}" \
        --out "$OUT/seeds" --quiet || bad=1
    done
  done
  return $bad
}
st_profile() {  # fused, loop and compiled in one process, per precision; fp32 in OUT/profile
  local p dir bad=0
  for p in "${PROF_LIST[@]}"; do
    dir=$OUT/profile; [ "$p" = fp32 ] || dir=$OUT/profile_$p
    echo "profile: $p $(date -u +%T)"
    "${H[@]}" profile configs/nmt_torch.yaml --set device=$DEV --set precision=$p \
      --set tf32=$(tf32_of $p) --set data.synthetic.sentences_per_rank=1536 "${TINY[@]}" \
      --steps 2 --out "$dir" || bad=1
  done
  return $bad
}
st_gemm() {
  if [ "$DEV" = cuda ]; then
    # The seeds' NMT runs batch 384 and 256 per encoder direction: both on the curve, so the
    # limit table charges its recurrent products a measured rate (the first loan's had neither).
    "${H[@]}" gemm --device cuda --hidden 256,512,1024,2048 --precision fp32,tf32,bf16 \
      --batch 1,2,4,8,16,32,64,96,128,192,256,320,384,448,512 \
      --repeats 3 --min-time 0.005 --peak-size 8192 --out "$OUT/gemm"
  else
    "${H[@]}" gemm --device cpu --hidden 32,64 --batch 8,16 --precision fp32 --repeats 1 \
      --warmup 1 --min-time 0.001 --peak-size 128 --no-plot --out "$OUT/gemm"
  fi
}
st_batch() {
  local impl batches=64,128,256,384,512
  [ "$DEV" = cuda ] || batches=4,8
  for impl in "${S_IMPL_LIST[@]}"; do
    "${H[@]}" batch configs/nmt_torch.yaml --batch $batches --set device=$DEV \
      --set model.rnn_impl=$impl "${STEPS[@]}" "${TINY[@]}" --out "$OUT/batch_$impl" --timeout 60 \
      || return
  done
}
st_limit() {
  # Without a gemm stage of its own (cut for time), an H100 takes the H100 curves measured on
  # 2026-11-27; the table's last line names the curves it used.
  local curves=() h100=bench/results/h100_2026-11-27/gpu/gemm
  [ "$DEV" = cuda ] || echo "CPU REHEARSAL: the figures below are no GPU figures."
  [ "$DEV" != cuda ] || ! grep -q '"gpu": "NVIDIA H100' "$OUT/machine.json" || curves=("$h100")
  "$PY" -m hvdscale.study.stepcost.gpu_limit "$OUT" "${curves[@]}"
}
if [ "${1:-}" = --stage ]; then  # a stage in a process of its own (see stage below)
  cd "$REPO" && "st_$2"
  exit
fi

# --- the command line, the target's Python, the bundle -----------------------------------------
REHEARSE=${REHEARSE:-}
if [ "${1:-}" = --rehearse-cpu ]; then export REHEARSE=cpu; shift; fi
[ $# -eq 2 ] || die "usage: bash evidence/gpu_device.sh [--rehearse-cpu] BUNDLE OUT"
PY=$(command -v "${PYTHON:-python3}") || die "no '${PYTHON:-python3}' on PATH (set PYTHON)"
REHEARSE=${REHEARSE:-} "$PY" - <<'PY' || exit 2
import os, sys
try:
    import torch
except ImportError:
    sys.exit(f"gpu_device: ERROR: {sys.executable} has no torch")
if os.environ["REHEARSE"] != "cpu" and not torch.cuda.is_available():
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    sys.exit("gpu_device: ERROR: no GPU visible to torch (CUDA_VISIBLE_DEVICES="
             f"{'unset' if cvd is None else repr(cvd)}): run this on a machine with a GPU, "
             "or pass --rehearse-cpu for a CPU rehearsal (no GPU figures)")
PY
# Only now that the machine can run it is anything written (a refusal leaves no trace).
mkdir -p "$2" || die "cannot create $2"
BUNDLE=$(cd "$(dirname "$1")" 2>/dev/null && echo "$PWD/$(basename "$1")") || die "no bundle at $1"
OUT=$(cd "$2" && pwd)
[ -e "$BUNDLE" ] || die "no bundle at $1 (build one: launch/bundle.sh, docs/offline.md)"
if [ -f "$BUNDLE" ]; then  # the tarball launch/bundle.sh makes: unpacked in a private folder,
  # not in OUT: a device call sends OUT back, and the wheels are tens of MB
  unpacked=$(mktemp -d "${TMPDIR:-/tmp}/gpu-device-bundle.XXXXXX") || die "no temporary folder"
  trap 'rm -rf "$unpacked"' EXIT
  tar -xzf "$BUNDLE" -C "$unpacked" || die "cannot unpack $BUNDLE"
  BUNDLE="$unpacked/$(basename "$BUNDLE" .tar.gz)"
  [ -d "$BUNDLE" ] || die "$1 did not unpack to $(basename "$BUNDLE")"
fi
[ -z "$REHEARSE" ] || echo "CPU rehearsal (--rehearse-cpu): tiny sizes on the CPU; no figure here is a GPU figure" \
  | tee "$OUT/REHEARSAL"
STAGES=",${STAGES:-install,check,strategies,exact,seeds,profile,gemm,batch,limit},"
# The Python the bundle goes into runs everything: its scripts (mpirun, hvdscale) come first.
BIN=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
export PY BUNDLE OUT PATH="$BIN:$PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
# Two ranks on one host talk through /dev/shm; where it is small, over TCP. Not always TCP: with
# only loopback up (no network at all) Open MPI's TCP finds no interface and the ranks abort.
shm_mb=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
[ "${shm_mb:-0}" -ge 512 ] || export OMPI_MCA_btl=${OMPI_MCA_btl:-self,tcp}
[ -z "$REHEARSE" ] || export CUDA_VISIBLE_DEVICES=""
failed=() skipped=()
T0=$(date +%s)
# BUDGET_S (optional): the seconds this whole run may take (a device call's limit less a margin).
# A stage starts only while at least half its limit is left, and never runs past the budget less
# the limit stage's reserve; a stage left out is listed in OUT/skipped.txt for a later call.
stage() {  # stage NAME LIMIT_S: runs when asked, in its own process, logs to OUT/NAME.log
  local name=$1 limit=$2 left
  case "$STAGES" in *",$name,"*) ;; *) return 0 ;; esac
  local var="LIMIT_${name^^}"; limit=${!var:-$limit}
  if [ -n "${BUDGET_S:-}" ]; then
    local reserve=20; [ "$name" != limit ] || reserve=0  # the limit table's time is kept
    left=$(( BUDGET_S - ($(date +%s) - T0) - reserve ))
    if (( left < limit / 2 )); then
      skipped+=("$name"); echo "== $name skipped: ${left}s left of BUDGET_S, its limit ${limit}s"
      echo "$name" >>"$OUT/skipped.txt"; return 0
    fi
    (( limit <= left )) || limit=$left
  fi
  echo "== $name (limit ${limit}s) $(date -u +%T)"
  timeout -k 10 "$limit" bash "$HERE/gpu_device.sh" --stage "$name" >"$OUT/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { failed+=("$name:$rc"); echo "   $name failed ($rc); tail of $OUT/$name.log:"; tail -5 "$OUT/$name.log"; }
}

stage install 180
"$PY" - "$OUT/machine.json" <<'PY' || failed+=("machine")
import json, os, platform, shutil, subprocess, sys
import torch
rehearsal = os.environ.get("REHEARSE") == "cpu"
gpu = None
if not rehearsal and shutil.which("nvidia-smi"):
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_mode",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
cuda = torch.cuda.is_available() and not rehearsal
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if "model name" in l), None)
mem = next((int(l.split()[1]) // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), None)
json.dump({"rehearsal": "cpu" if rehearsal else None, "gpu": gpu,
           "cuda": torch.version.cuda if cuda else None,
           "cudnn": torch.backends.cudnn.version() if cuda else None,
           "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
           "torch": torch.__version__, "python": platform.python_version(),
           "python_executable": sys.executable, "cores": os.cpu_count(),
           "cpu": cpu, "memory_mb": mem, "loadavg": os.getloadavg()}, open(sys.argv[1], "w"), indent=1)
PY
[ -z "$REHEARSE" ] || LIMIT_CHECK=${LIMIT_CHECK:-240}  # four CPU runs at this machine's load
stage check 120
SEED_WARMUP=${SEED_WARMUP:-$([ -z "$REHEARSE" ] && echo 5 || echo 1)}
SEED_STEPS=${SEED_STEPS:-$([ -z "$REHEARSE" ] && echo 15 || echo 2)}
export SEED_WARMUP SEED_STEPS
# In order of value (issue 43): the seeds' rows and kernels per step, then the strategies,
# exactness, the batch sweep, and the GEMM curves (measured once already, 2026-11-27).
stage seeds 300
stage profile 360
stage strategies 240
stage exact 120
stage batch 150
stage gemm 90
stage limit 30
[ ! -f "$OUT/limit.log" ] || cp "$OUT/limit.log" "$OUT/limit.md"
echo "== done $(date -u +%T); results in $OUT${failed[*]:+; failed: ${failed[*]}}${skipped[*]:+; skipped (no time left): ${skipped[*]}}"
[ ${#failed[@]} -eq 0 ]
