#!/usr/bin/env bash
# The scaling sweep past two ranks, for a machine with >= 9 cores and no network (issue 30):
#
#   bash evidence/many_cores.sh BUNDLE OUT      # BUNDLE: a folder or .tar.gz from launch/bundle.sh
#
# 1. installs the bundle into the machine's Python ($PYTHON, default python3). Where that Python
#    is itself a venv (a site's torch often lives in one) the bundle goes into it: a venv made
#    over a venv sees the base's packages, not the venv's torch. Otherwise into a fresh venv
#    (--system-site-packages, so the site's torch is used and never replaced) in a new private
#    temporary folder ($VENV names another, which must not exist yet);
# 2. describes the machine (cores, CPU model, memory, GPUs: present, unused) into OUT/machine.json;
# 3. runs interleaved rounds of `hvdscale sweep` at np = $NPS (default 1,2,4,8) for $STRATEGIES
#    (default horovod,ps,independent,ddp) in PyTorch on $CONFIGS (default demo,nmt_cpu_seed:
#    configs/<name>.yaml), each rank's process pinned to a core of its own (evidence/pin_rank.sh; one
#    compute thread: threads.intra_op=1), Horovod's background thread on a spare core; the load
#    is recorded before and after every sweep (OUT/load.log) and in every run record; after the
#    first round ($OVERHEAD_AFTER names another), bench/bench_overhead.py at np = 2 and the largest np;
# 4. validates `predict --fit` (fit on n <= 4, predict every larger n) and writes the tables:
#    OUT/report.md and OUT/validate.json (evidence/many_cores_report.py).
#
# Sized from the runs on a 16-core GPU host (2026-11-27b) and the shared launches (issue 53): a
# sweep starts one launch per rank count and round, $LAUNCH_S each (the ranks' start-up there:
# imports 5.0 s, MPI 1.5 s and the optimizer's first step 6.3 s, medians of 31 records), then
# $POINT_S a point (its warm-up and measured steps there, 0.3 + 1.2 s, plus its set-up, record
# and teardown, 0.1 s here; rounded up); an overhead bench about 40 s. The plan (launches x
# LAUNCH_S + points x POINT_S) is printed first; CONFIGS=demo halves it. Each sweep has its own deadline (1.5 x its
# estimate) and the whole run after the install $DEADLINE_S (default: the plan + 10%); what would not fit is cut
# or skipped and said in OUT/phases.log. Results are small text files only (under 1 MB).
# Overrides for a try on a small machine: NPS=1,2 ROUNDS=1 CONFIGS=demo STEPS=small LABEL=...
# END_AT (epoch seconds) ends the measuring by then whatever the install took (a device call's limit).
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUNDLE=${1:?usage: evidence/many_cores.sh BUNDLE OUT}
OUT=${2:?usage: evidence/many_cores.sh BUNDLE OUT}
NPS=${NPS:-1,2,4,8}
ROUNDS=${ROUNDS:-2}
CONFIGS=${CONFIGS:-demo,nmt_cpu_seed}
STRATEGIES=${STRATEGIES:-horovod,ps,independent,ddp}
LAUNCH_S=${LAUNCH_S:-13}
POINT_S=${POINT_S:-3}
OVERHEAD_S=${OVERHEAD_S:-40}
LABEL=${LABEL:-many-cores}
START=$(date +%s)
mkdir -p "$OUT" || { echo "many_cores: ERROR: cannot create $OUT" >&2; exit 1; }
OUT=$(cd "$OUT" && pwd)
log() { echo "many_cores: [$(( $(date +%s) - START ))s, load $(cut -d' ' -f1 /proc/loadavg)] $*" \
  | tee -a "$OUT/phases.log"; }
n_nps=$(tr ',' '\n' <<<"$NPS" | grep -c .)
n_strat=$(tr ',' '\n' <<<"$STRATEGIES" | grep -c .)
n_cfg=$(tr ',' '\n' <<<"$CONFIGS" | grep -c .)
sweep_est=$(( n_nps * LAUNCH_S + n_nps * n_strat * POINT_S ))  # a launch per rank count
plan_s=$(( ROUNDS * n_cfg * sweep_est + 2 * OVERHEAD_S ))
DEADLINE_S=${DEADLINE_S:-$(( plan_s * 11 / 10 + 60 ))}
MEASURE_START=$START  # reset after the install: the deadline covers the plan, not the install
left() {  # seconds left: of DEADLINE_S after the install, and before END_AT (epoch s) if set
  local now a; now=$(date +%s); a=$(( DEADLINE_S - (now - MEASURE_START) ))
  [ -z "${END_AT:-}" ] || (( END_AT - now >= a )) || a=$(( END_AT - now ))
  echo "$a"
}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/hvdscale-many-cores.XXXXXX")  # private (0700), new name
trap 'rm -rf "$scratch"' EXIT

# --- 1. install ---------------------------------------------------------------------------------
PY=$(command -v "${PYTHON:-python3}") || { log "ERROR: no '${PYTHON:-python3}' on PATH (set PYTHON)"; exit 1; }
max_np=$(tr ',' '\n' <<<"$NPS" | sort -n | tail -1)
mapfile -t cores < <("$PY" -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))')
[ "${#cores[@]}" -ge "$max_np" ] || { log "ERROR: np=$max_np needs $max_np cores, this has ${#cores[@]}"; exit 1; }
log "plan: $ROUNDS round(s) x $n_cfg config(s) x ($n_nps launches at ~${LAUNCH_S}s + $(( n_nps * n_strat )) points at ~${POINT_S}s) + overhead = ~${plan_s}s; deadline ${DEADLINE_S}s"
if [ -f "$BUNDLE" ]; then  # a tarball: unpack it; its one top folder is the bundle
  tar -xzf "$BUNDLE" -C "$scratch" || { log "ERROR: cannot unpack $BUNDLE"; exit 1; }
  BUNDLE=$(ls -d "$scratch"/*/ | head -1)
fi
if "$PY" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  # A venv already: install into it (a venv over it would not see its packages).
  log "$PY is a venv ($("$PY" -c 'import sys; print(sys.prefix)')): the bundle goes into it"
elif [ -n "${VENV:-}" ] && [ -e "$VENV" ]; then
  log "ERROR: VENV=$VENV exists: name a new folder, or leave VENV out for a private one"; exit 1
else
  VENV=${VENV:-$scratch/venv}
  # Without ensurepip (some site Pythons) the venv runs the site's pip, which installs into it.
  "$PY" -m venv --system-site-packages "$VENV" 2>/dev/null \
    || "$PY" -m venv --clear --without-pip --system-site-packages "$VENV" \
    || { log "ERROR: cannot make a venv with $PY"; exit 1; }
  PY=$VENV/bin/python
fi
log "install $BUNDLE into $("$PY" -c 'import sys; print(sys.prefix)')"
PYTHON=$PY timeout 300 bash "$REPO/launch/bundle.sh" install "$BUNDLE" \
  > "$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; log "ERROR: install failed"; exit 1; }
tail -3 "$OUT/install.log"
MEASURE_START=$(date +%s)
BIN=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
export PATH="$BIN:$PATH" PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 OMP_NUM_THREADS=1 \
  CUDA_VISIBLE_DEVICES=""  # the GPU is present but unused: this is the CPU sweep
[ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PIN_CORES=$(IFS=,; echo "${cores[*]}") PIN_MAX_NP=$max_np PIN_PYTHON=$PY

# --- 2. the machine ------------------------------------------------------------------------------
"$PY" - "$OUT/machine.json" "$LABEL" <<'PY'
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
log "machine: $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["cpu_model"], d["cores_usable"], "cores", d["memory_mib"], "MiB")' "$OUT/machine.json")"

# --- 3. interleaved rounds, the overhead bench between them -------------------------------------
# The steps are cut to what a median over rounds still needs; start-up dominates a point.
DEMO_SETS=(measure.warmup_steps=3 measure.steps=12 data.synthetic.sentences_per_rank=384)
NMT_SETS=(measure.warmup_steps=1 measure.steps=5 data.synthetic.sentences_per_rank=256)
read -r -a EXTRA_SETS <<<"${SETS:-}"  # e.g. SETS="measure.steps=3": last, so they win
RESERVE_S=15  # for the report at the end
failed=()
stage_budget() {  # estimate_s: 1.5 x the estimate, within what the whole deadline leaves
  local want=$(( $1 * 3 / 2 + 20 )) have=$(( $(left) - RESERVE_S ))
  echo $(( want < have ? want : have ))
}
sweep() {  # round name
  local round=$1 name=$2 out budget sets=()
  out="$OUT/round$round/$name"
  mkdir -p "$OUT/round$round"
  budget=$(stage_budget "$sweep_est")
  if (( budget < 10 )); then log "round $round $name skipped: deadline"; failed+=("r$round-$name:skipped"); return; fi
  [ -f "$REPO/configs/$name.yaml" ] || { log "round $round $name: no configs/$name.yaml"; failed+=("r$round-$name:missing"); return; }
  case $name in demo) sets=("${DEMO_SETS[@]}") ;; nmt_cpu_seed) sets=("${NMT_SETS[@]}") ;; esac
  local args=(--np "$NPS" --strategies "$STRATEGIES" --out "$out" --no-plot
              --timeout 120 --set threads.intra_op=1 --set threads.inter_op=1
              --launcher-args "$REPO/evidence/pin_rank.sh")
  for s in "${sets[@]}" "${EXTRA_SETS[@]}"; do args+=(--set "$s"); done
  echo "round $round $name before $(cat /proc/loadavg)" >>"$OUT/load.log"
  timeout "$budget" "$PY" -m hvdscale sweep "$REPO/configs/$name.yaml" "${args[@]}" >"$out.log" 2>&1
  local rc=$?
  echo "round $round $name after $(cat /proc/loadavg) rc=$rc" >>"$OUT/load.log"
  log "round $round $name: rc=$rc (deadline ${budget}s)$( ((rc == 124)) && echo ' (cut by the deadline)')"
  (( rc == 0 )) || failed+=("r$round-$name:$rc")
}
overhead() {  # np
  local n=$1 budget
  budget=$(stage_budget "$OVERHEAD_S")
  if (( n > ${#cores[@]} )); then log "overhead np=$n skipped: ${#cores[@]} cores"; return; fi
  if (( budget < 20 )); then log "overhead np=$n skipped: deadline"; failed+=("overhead$n:skipped"); return; fi
  # the sweep's own launch line (hvdscale.study.sweep.launcher), each rank pinned by pin_rank.sh
  timeout "$budget" "$PY" -m hvdscale.study.sweep.launcher --np "$n" -- "$REPO/evidence/pin_rank.sh" \
    "$PY" "$REPO/bench/bench_overhead.py" --config "$REPO/configs/demo.yaml" \
    --rounds "${OVERHEAD_ROUNDS:-4}" --json "$OUT/overhead_np$n.json" >"$OUT/overhead_np$n.log" 2>&1
  local rc=$?
  log "overhead np=$n: rc=$rc (deadline ${budget}s)"
  (( rc == 0 )) || failed+=("overhead$n:$rc")
}
IFS=, read -r -a configs <<<"$CONFIGS"
for ((r = 1; r <= ROUNDS; r++)); do
  # Every other round takes the configs in the other order, so drift hits both alike.
  order=("${configs[@]}")
  (( r % 2 )) || for ((i = 0; i < ${#configs[@]}; i++)); do order[i]=${configs[-1 - i]}; done
  for c in "${order[@]}"; do sweep "$r" "$c"; done
  # After round OVERHEAD_AFTER (default 1): the harness overhead, every rank on a core of its own.
  if (( r == ${OVERHEAD_AFTER:-1} || (r == ROUNDS && ${OVERHEAD_AFTER:-1} > ROUNDS) )); then overhead 2; (( max_np == 2 )) || overhead "$max_np"; fi
done

# --- 4. validation and tables --------------------------------------------------------------------
if "$PY" "$REPO/evidence/many_cores_report.py" "$OUT" --fit-max 4 > "$OUT/report.md" 2>"$OUT/report.err"; then
  log "report: $OUT/report.md"
else
  log "report failed: $(tail -1 "$OUT/report.err")"; failed+=(report)
fi
log "done in $(( $(date +%s) - START ))s; results in $OUT${failed[*]:+; failed or cut: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
