#!/usr/bin/env bash
# Issue 43's evidence run on a lent GPU machine (16 cores, one GPU, no network), in two device
# calls, each a single command that stands on its own (its own machine.json, its own results):
#
#   bash evidence/evidence_run.sh --part cpu BUNDLE OUT/cpu    # call 1: ~9 min, run it with timeout_s 540
#   bash evidence/evidence_run.sh --part gpu BUNDLE OUT/gpu    # call 2: ~4.5 min, timeout_s 300
#   bash evidence/evidence_run.sh --plan                       # the stages and deadlines; exit 1 if
#                                                           # they do not fit the device's limits
# --pack FILE (before --part) keeps FILE a .tar.gz of OUT, rewritten every PACK_EVERY_S (20) and at
# the end: the device tool returns at most 8 files, 2 folders down, so a call writes OUT under
# /tmp and packs it into $OUT; a call cut at its limit still returns what the last pack held:
#   bash evidence/evidence_run.sh --pack $OUT/cpu.tar.gz --part cpu BUNDLE /tmp/evidence/cpu
# --rehearse-cpu (before --part) runs the same code paths on this CPU with tiny sizes: no figure
# it writes is a GPU figure (gpu_device.sh labels its results so).
#
# cpu: the sweep on the CPU only (CUDA_VISIBLE_DEVICES="", a core per rank: evidence/pin_rank.sh),
#      nothing else running: horovod, ps, ddp, independent at np = 1,2,3,4,6,8 on configs/demo.yaml
#      in up to 3 interleaved rounds, then the harness overhead at np 2 and 8 if time is left,
#      `predict --fit` on n <= 4 validated at 6 and 8 (evidence/many_cores.sh), then Horovod
#      against DDP at the largest np paired per round (OUT/paired.json), then, only if time is
#      left, bench/bench_startup.py at np 1,2,4,8 (issue 40) and `hvdscale fusion` at np 8.
# gpu: evidence/gpu_device.sh in order of value: gpu_check's JSON; the seeds' config fused, loop and
#      compiled at fp32, TF32 and bf16; kernels per step (profile) per precision; every strategy at
#      np 1 and 2 in fp32 and bf16; exactness (ran/skipped per strategy); `hvdscale batch`; the
#      GEMM curves; the limit table. Stages that do not fit BUDGET_S are skipped and named in
#      OUT/skipped.txt with the command that runs them in a later call (OUT/next.txt).
#
# Sized from the first contact (INSTALL-NOTES.md, 2026-11-27 on an H100 host): a machine starts
# in ~30 s, the bundle installs in 50 s (a second install verifies only), a sweep point costs
# ~15 s before issue 40's start-up cuts; the first evidence loan (bench/results/h100_2026-11-27b)
# measured 14 s a point after them, 13 s of it start-up (6 s the optimizer's torch._dynamo import).
# A sweep now starts its ranks once per rank count and round (issue 53): 13 s a launch (LAUNCH_S)
# and ~3 s a point (POINT_S: 1.5 s warm-up and measured steps there, set-up and teardown 0.1 s
# here), so a round of 24 points at 6 rank counts is 6 x 13 + 24 x 3 = 150 s and one call's
# 450-s sweep deadline holds 3 rounds (each call's OUT/phases.log re-measures it); a seeds run 24 s fused / 41 s loop at 20 steps, a profile 92 s, the GPU
# exactness tests 35 s. 15 minutes of device time: 30 s start + 540 s + 300 s + transfers.
# Overrides: BUDGET_S (the part's own deadline), POINT_S, ROUNDS, NPS, STAGES (gpu part).
set -uo pipefail
die() { echo "evidence_run: ERROR: $*" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CALL_LIMIT_S=600 SESSION_S=900 START_S=30  # the device tool's limits (per call, per session)
CPU_TIMEOUT_S=${CPU_TIMEOUT_S:-540}          # the timeout_s each call is given
GPU_TIMEOUT_S=${GPU_TIMEOUT_S:-300}
REHEARSE=
PART=
PACK=

plan() {  # prints both calls' stages and deadlines; fails where they exceed the device's limits
  local cpu=$(( CPU_TIMEOUT_S - 20 )) gpu=$(( GPU_TIMEOUT_S - 15 )) total ok=0
  total=$(( START_S + CPU_TIMEOUT_S + GPU_TIMEOUT_S ))
  echo "call 1: --part cpu, timeout_s $CPU_TIMEOUT_S, BUDGET_S $cpu"
  echo "  install 60 (verify-only when already installed), then the sweep's deadline $(( cpu - 60 - 10 ))s:"
  echo "  rounds of 24 points (4 strategies x np 1,2,3,4,6,8), one launch per rank count: 6 launches"
  echo "  x 13 s start-up (measured 2026-11-27b) + 24 points x 3 s = 150 s a round, so 3 rounds a call;"
  echo "  then the overhead at np 2 and 8 (~30 s each) if time is left,"
  echo "  report (predict --fit n<=4, validated at 6 and 8) 15, paired np 8 5; fusion np 8 if >= 150 s left"
  echo "call 2: --part gpu, timeout_s $GPU_TIMEOUT_S, BUDGET_S $gpu (a stage starts with half its limit left)"
  echo "  $(grep -E '^stage [a-z]+ [0-9]+$' "$HERE/gpu_device.sh" | cut -d' ' -f2,3 | paste -sd, | sed 's/,/, /g')"
  echo "  expected: install ~30 (verify only), check ~60, seeds ~190 (9 runs at 2+6 steps): ~285s;"
  echo "  profile and what follows go to a later call"
  echo "  (what BUDGET_S cannot hold is skipped and named in OUT/skipped.txt, its command in OUT/next.txt)"
  echo "device time: start $START_S + $CPU_TIMEOUT_S + $GPU_TIMEOUT_S = ${total}s of ${SESSION_S}s"
  (( CPU_TIMEOUT_S <= CALL_LIMIT_S && GPU_TIMEOUT_S <= CALL_LIMIT_S )) || { echo "a call exceeds ${CALL_LIMIT_S}s"; ok=1; }
  (( total <= SESSION_S - 15 )) || { echo "the calls exceed the session's ${SESSION_S}s"; ok=1; }
  (( cpu < CPU_TIMEOUT_S && gpu < GPU_TIMEOUT_S )) || { echo "a budget exceeds its call's timeout"; ok=1; }
  return $ok
}

paired() {  # OUT: Horovod against DDP at the largest np, per round (the same round: paired)
  "$PY" - "$1" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1]); rows = []
rounds = {f.parent.parent.name: [r for r in map(json.loads, f.read_text().splitlines())
                                 if r.get("status") == "ok"]
          for f in sorted(out.glob("round*/demo/results.jsonl"))}
n = max((r["workers"] for recs in rounds.values() for r in recs), default=0)
for name, ok in rounds.items():  # a round cut before np = n has no pair: left out
    ws = {r["config"]["strategy"]["name"]: r["words_per_s"] for r in ok if r["workers"] == n}
    if "horovod" in ws and "ddp" in ws:
        rows.append({"round": name, "np": n, "horovod": ws["horovod"],
                     "ddp": ws["ddp"], "ratio": ws["horovod"] / ws["ddp"]})
r = [x["ratio"] for x in rows]
res = {"pairs": rows, "median": statistics.median(r) if r else None,
       "min": min(r, default=None), "max": max(r, default=None)}
json.dump(res, open(out / "paired.json", "w"), indent=1)
print(f"horovod/ddp at the largest np: {len(r)} paired round(s)" + (
    f", median {res['median']:.3f} (range {res['min']:.3f}-{res['max']:.3f})" if r else ""))
PY
}

part_cpu() {  # BUNDLE OUT
  local budget=${BUDGET_S:-$(( CPU_TIMEOUT_S - 20 ))} t0 left rc
  t0=$(date +%s)
  if [ -n "$REHEARSE" ]; then  # the 2-core rehearsal: the same path, two rank counts, tiny runs
    export NPS=${NPS:-1,2} ROUNDS=${ROUNDS:-2} POINT_S=${POINT_S:-30} OVERHEAD_S=60 OVERHEAD_ROUNDS=1
    export SETS=${SETS:-"measure.warmup_steps=1 measure.steps=3 data.synthetic.sentences_per_rank=64"}
    budget=${BUDGET_S:-1200}
  fi
  export NPS=${NPS:-1,2,3,4,6,8} ROUNDS=${ROUNDS:-3} CONFIGS=demo POINT_S=${POINT_S:-3} \
    STRATEGIES=${STRATEGIES:-horovod,ps,ddp,independent} OVERHEAD_S=${OVERHEAD_S:-30} \
    OVERHEAD_ROUNDS=${OVERHEAD_ROUNDS:-2} LABEL=evidence-cpu
  export OVERHEAD_AFTER=${OVERHEAD_AFTER:-$ROUNDS}  # the rounds first: they are worth more
  export DEADLINE_S=$(( budget - 60 - 10 ))  # the install (<= 60 s) and the paired step outside it
  export END_AT=$(( t0 + budget - 10 ))  # a slow install shortens the sweeps, never the report
  echo "evidence_run cpu: budget ${budget}s, sweep deadline ${DEADLINE_S}s, NPS=$NPS ROUNDS=$ROUNDS"
  bash "$HERE/many_cores.sh" "$1" "$2"
  rc=$?
  paired "$2" || rc=1
  left=$(( budget - ($(date +%s) - t0) ))
  # Issue 40's start-up against its floor at np 1, 2, 4 and 8 (a core per rank), if time is left.
  if [ -z "$REHEARSE" ] && (( left >= 150 )); then
    echo "start-up against its floor at np 1,2,4,8: ${left}s left"
    CUDA_VISIBLE_DEVICES="" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
    timeout $(( left - 10 )) "$PY" bench/bench_startup.py --np 1,2,4,8 --rounds 2 --doctor-rounds 1 \
      --json "$2/startup.json" >"$2/startup.log" 2>&1 || echo "startup: rc=$? (cut or failed: $2/startup.log)"
  else
    echo "start-up bench left out: ${left}s left (needs 150)${REHEARSE:+, a rehearsal}" | tee "$2/startup.skipped"
  fi
  left=$(( budget - ($(date +%s) - t0) ))
  if [ -z "$REHEARSE" ] && (( rc == 0 && left >= 150 )); then
    echo "fusion at np 8: ${left}s left"
    CUDA_VISIBLE_DEVICES="" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
    timeout $(( left - 10 )) "$PY" -m hvdscale fusion configs/demo.yaml --np 8 --threshold-mb 0,4,64 \
      --cycle-ms 1,5 --overlap hooks --repeats 1 --no-plot --set threads.intra_op=1 \
      --out "$2/fusion" >"$2/fusion.log" 2>&1 || echo "fusion: rc=$? (cut or failed: $2/fusion.log)"
  elif [ -n "$REHEARSE" ]; then
    echo "fusion at np 8 left out: a rehearsal (np 8 needs 8 cores)" | tee "$2/fusion.skipped"
  else
    echo "fusion at np 8 left out: ${left}s left (needs 150), sweep rc=$rc" | tee "$2/fusion.skipped"
  fi
  return $rc
}

part_gpu() {  # BUNDLE OUT
  local rc left
  export BUDGET_S=${BUDGET_S:-$([ -z "$REHEARSE" ] && echo $(( GPU_TIMEOUT_S - 15 )) || echo 900)}
  [ -n "$REHEARSE" ] || export SEED_WARMUP=${SEED_WARMUP:-2} SEED_STEPS=${SEED_STEPS:-6}
  local t0; t0=$(date +%s)
  bash "$HERE/gpu_device.sh" ${REHEARSE:+--rehearse-cpu} "$1" "$2"
  rc=$?
  if [ -s "$2/skipped.txt" ]; then
    echo "STAGES=$(paste -sd, "$2/skipped.txt") BUDGET_S=520 bash evidence/evidence_run.sh --part gpu BUNDLE OUT/gpu2" \
      | tee "$2/next.txt"
  fi
  # Last, if time remains: the learning-rate rules at np 4 and 8 (needs bench_lr_rules.py --np).
  left=$(( BUDGET_S - ($(date +%s) - t0) ))
  if ! "$PY" bench/bench_lr_rules.py --help 2>/dev/null | grep -q -- "--np"; then
    echo "lr_rules left out: bench_lr_rules.py has no --np (it runs np = 2 only)" | tee "$2/lr_rules.skipped"
  elif (( left >= 120 )); then
    timeout $(( left - 5 )) "$PY" bench/bench_lr_rules.py --np 4,8 --rounds 1 \
      ${REHEARSE:+--smoke} --out "$2/lr_rules.json" >"$2/lr_rules.log" 2>&1 || echo "lr_rules: rc=$?"
  else
    echo "lr_rules left out: ${left}s left (needs 120)" | tee "$2/lr_rules.skipped"
  fi
  return $rc
}

while [ $# -gt 0 ]; do
  case $1 in
    --rehearse-cpu) REHEARSE=cpu; shift ;;
    --plan) plan; exit ;;
    --pack) PACK=${2:-}; shift 2 || die "--pack needs a FILE.tar.gz" ;;
    --part) PART=${2:-}; shift 2 || die "--part needs cpu or gpu" ;;
    -*) die "unknown option $1" ;;
    *) break ;;
  esac
done
[ "$PART" = cpu ] || [ "$PART" = gpu ] || die "usage: bash evidence/evidence_run.sh [--rehearse-cpu] --part cpu|gpu BUNDLE OUT (or --plan)"
[ $# -eq 2 ] || die "usage: bash evidence/evidence_run.sh [--rehearse-cpu] --part $PART BUNDLE OUT"
[ -e "$1" ] || die "no bundle at $1 (build one: launch/bundle.sh, docs/offline.md)"
mkdir -p "$2" || die "cannot create $2"
PY=$(command -v "${PYTHON:-python3}") || die "no '${PYTHON:-python3}' on PATH (set PYTHON)"
BUNDLE=$(cd "$(dirname "$1")" && echo "$PWD/$(basename "$1")")
OUT=$(cd "$2" && pwd)
pack() {  # OUT as PACK, atomically (a reader never sees half a file); wheels are never packed
  tar -czf "$PACK.part" --exclude='*.whl' -C "$(dirname "$OUT")" "$(basename "$OUT")" 2>/dev/null \
    && mv -f "$PACK.part" "$PACK"
}
if [ -n "$PACK" ]; then
  [[ $PACK == *.tar.gz ]] || die "--pack $PACK: the file must end in .tar.gz"
  mkdir -p "$(dirname "$PACK")" && touch "$PACK.part" && rm -f "$PACK.part" \
    || die "--pack $PACK: cannot write there"
  PACK=$(cd "$(dirname "$PACK")" && echo "$PWD/$(basename "$PACK")")
  case "$PACK/" in "$OUT"/*) die "--pack $PACK: must lie outside OUT ($OUT)" ;; esac
  # The packer writes to a log, not to this script's output: its `sleep` would otherwise hold
  # the caller's pipes open for up to PACK_EVERY_S after this script ended (a device call, or a
  # test, waited that long for nothing). Its sleep is ended with it.
  (while sleep "${PACK_EVERY_S:-20}"; do pack; done) >>"$OUT/pack.log" 2>&1 &
  packer=$!
  trap 'pkill -P $packer 2>/dev/null; kill $packer 2>/dev/null; pack' EXIT
fi
cd "$HERE/.." || die "no repository at $HERE/.."
echo "evidence_run --part $PART${REHEARSE:+ (CPU rehearsal: no GPU figures)} started $(date -u +%T)" | tee "$OUT/evidence.log"
"part_$PART" "$BUNDLE" "$OUT" 2>&1 | tee -a "$OUT/evidence.log"
rc=${PIPESTATUS[0]}
echo "evidence_run --part $PART ended $(date -u +%T) rc=$rc" | tee -a "$OUT/evidence.log"
exit "$rc"
