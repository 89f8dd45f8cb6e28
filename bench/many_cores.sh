#!/usr/bin/env bash
# The scaling sweep past two ranks, for a machine with >= 9 cores and no network (issue 30):
#
#   bash bench/many_cores.sh BUNDLE OUT      # BUNDLE: a folder or .tar.gz from launch/bundle.sh
#
# 1. installs the bundle into a fresh venv over the machine's Python ($PYTHON, default python3;
#    --system-site-packages, so the site's torch is used and never replaced);
# 2. describes the machine (cores, CPU model, memory, GPUs: present, unused) into OUT/machine.json;
# 3. runs interleaved rounds of `hvdscale sweep` at np = $NPS (default 1,2,3,4,6,8) for horovod,
#    ps, independent and ddp in PyTorch on configs/demo.yaml and configs/nmt_cpu_seed.yaml,
#    each rank's process pinned to a core of its own (bench/pin_rank.sh; one compute thread:
#    threads.intra_op=1), Horovod's background thread on a spare core; the load is recorded
#    before and after every sweep (OUT/load.log) and in every run record; after the first round,
#    bench/bench_overhead.py at np = 2 and the largest np;
# 4. validates `predict --fit` (fit on n <= 4, predict every larger n) and writes the tables:
#    OUT/report.md and OUT/validate.json (bench/many_cores_report.py).
#
# Sized from np = 1 and 2 measured on a 2-core machine (docs/offline.md): about 6-7 minutes on
# 16 cores. A hard deadline ($DEADLINE_S, default 390 s from the start) cuts or skips what would
# not finish and says so in OUT/phases.log. Results are small text files only (under 1 MB).
# Overrides for a try on a small machine: NPS=1,2 ROUNDS=2 DEADLINE_S=3000 LABEL=...
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUNDLE=${1:?usage: bench/many_cores.sh BUNDLE OUT}
OUT=${2:?usage: bench/many_cores.sh BUNDLE OUT}
NPS=${NPS:-1,2,3,4,6,8}
ROUNDS=${ROUNDS:-2}
DEADLINE_S=${DEADLINE_S:-390}
LABEL=${LABEL:-many-cores}
START=$(date +%s)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
log() { echo "many_cores: [$(( $(date +%s) - START ))s, load $(cut -d' ' -f1 /proc/loadavg)] $*" \
  | tee -a "$OUT/phases.log"; }
left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }

# --- 1. install ---------------------------------------------------------------------------------
max_np=$(tr ',' '\n' <<<"$NPS" | sort -n | tail -1)
mapfile -t cores < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
[ "${#cores[@]}" -ge "$max_np" ] || { log "ERROR: np=$max_np needs $max_np cores, this has ${#cores[@]}"; exit 1; }
if [ -f "$BUNDLE" ]; then  # a tarball: unpack it; its one top folder is the bundle
  unpacked=$(mktemp -d /tmp/hvdscale-bundle.XXXXXX)
  tar -xzf "$BUNDLE" -C "$unpacked" || { log "ERROR: cannot unpack $BUNDLE"; exit 1; }
  BUNDLE=$(ls -d "$unpacked"/*/ | head -1)
fi
VENV=${VENV:-/tmp/hvdscale-many-cores-venv}
rm -rf "$VENV"
# Without ensurepip (some site Pythons) the venv runs the site's pip, which installs into it.
"${PYTHON:-python3}" -m venv --system-site-packages "$VENV" 2>/dev/null \
  || { rm -rf "$VENV"; "${PYTHON:-python3}" -m venv --without-pip --system-site-packages "$VENV"; } \
  || { log "ERROR: cannot make a venv with ${PYTHON:-python3}"; exit 1; }
log "install $BUNDLE into $VENV"
PYTHON=$VENV/bin/python timeout 240 bash "$REPO/launch/bundle.sh" install "$BUNDLE" \
  > "$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; log "ERROR: install failed"; exit 1; }
tail -3 "$OUT/install.log"
export PATH="$VENV/bin:$PATH" PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 OMP_NUM_THREADS=1 \
  CUDA_VISIBLE_DEVICES=""  # the GPU is present but unused: this is the CPU sweep
[ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PIN_CORES=$(IFS=,; echo "${cores[*]}") PIN_MAX_NP=$max_np

# --- 2. the machine ------------------------------------------------------------------------------
python3 - "$OUT/machine.json" "$LABEL" <<'PY'
import json, os, platform, shutil, subprocess, sys
def run(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
mem = next((int(l.split()[1]) // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
json.dump({"label": sys.argv[2], "hostname": platform.node(), "cpu_model": model,
           "cores_usable": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(),
           "lscpu": run("lscpu"), "memory_mib": mem, "kernel": platform.release(),
           "gpus": run("nvidia-smi", "-L") if shutil.which("nvidia-smi") else "",
           "gpu_used": False, "loadavg_at_start": os.getloadavg()},
          open(sys.argv[1], "w"), indent=2)
PY
log "machine: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["cpu_model"], d["cores_usable"], "cores", d["memory_mib"], "MiB")' "$OUT/machine.json")"

# --- 3. interleaved rounds, the overhead bench between them -------------------------------------
# Sized from np = 1 on a 2-core machine (docs/offline.md): a point costs ~3.6 CPU-s of start-up
# plus its steps (demo ~0.10 s, nmt_cpu_seed ~0.38 s per step at np = 1, both under load);
# 48 points a round. The steps are cut to what a median over rounds still needs.
DEMO_SETS=(measure.warmup_steps=3 measure.steps=12 data.synthetic.sentences_per_rank=384)
NMT_SETS=(measure.warmup_steps=1 measure.steps=5 data.synthetic.sentences_per_rank=256)
RESERVE_S=15  # for the report at the end
sweep() {  # round config sets...
  local round=$1 config=$2 out name budget; shift 2
  name=$(basename "$config" .yaml)
  out="$OUT/round$round/$name"
  mkdir -p "$OUT/round$round"
  budget=$(( $(left) - RESERVE_S ))
  if (( budget < 10 )); then log "round $round $name skipped: deadline"; return; fi
  local args=(--np "$NPS" --strategies horovod,ps,independent,ddp --out "$out" --no-plot
              --timeout 120 --set threads.intra_op=1 --set threads.inter_op=1
              --launcher-args "$REPO/bench/pin_rank.sh")
  for s in "$@"; do args+=(--set "$s"); done
  echo "round $round $name before $(cat /proc/loadavg)" >>"$OUT/load.log"
  timeout "$budget" hvdscale sweep "$REPO/$config" "${args[@]}" >"$out.log" 2>&1
  local rc=$?
  echo "round $round $name after $(cat /proc/loadavg) rc=$rc" >>"$OUT/load.log"
  log "round $round $name: rc=$rc$( ((rc == 124)) && echo ' (cut by the deadline)')"
}
overhead() {  # np
  local n=$1 budget=$(( $(left) - RESERVE_S ))
  if (( n > ${#cores[@]} )); then log "overhead np=$n skipped: ${#cores[@]} cores"; return; fi
  if (( budget < 20 )); then log "overhead np=$n skipped: deadline"; return; fi
  timeout "$budget" mpirun -np "$n" --bind-to none "$REPO/bench/pin_rank.sh" \
    python "$REPO/bench/bench_overhead.py" --config "$REPO/configs/demo.yaml" --rounds 4 \
    --json "$OUT/overhead_np$n.json" >"$OUT/overhead_np$n.log" 2>&1
  log "overhead np=$n: rc=$?"
}
for ((r = 1; r <= ROUNDS; r++)); do
  # Every other round takes the configs in the other order, so drift hits both alike.
  if (( r % 2 )); then order=(demo nmt); else order=(nmt demo); fi
  for c in "${order[@]}"; do
    if [ "$c" = demo ]; then sweep "$r" configs/demo.yaml "${DEMO_SETS[@]}"
    else sweep "$r" configs/nmt_cpu_seed.yaml "${NMT_SETS[@]}"; fi
  done
  # After the first round: the harness overhead where every rank has cores of its own.
  if (( r == 1 )); then overhead 2; (( max_np == 2 )) || overhead "$max_np"; fi
done

# --- 4. validation and tables --------------------------------------------------------------------
python3 "$REPO/bench/many_cores_report.py" "$OUT" --fit-max 4 > "$OUT/report.md" 2>"$OUT/report.err" \
  && log "report: $OUT/report.md" || log "report failed: $(tail -1 "$OUT/report.err")"
log "done in $(( $(date +%s) - START ))s; results in $OUT"
