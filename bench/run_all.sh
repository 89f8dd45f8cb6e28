#!/usr/bin/env bash
# Every benchmark, results as JSON/Markdown under bench/results/ (BENCHMARKS.md quotes them).
# The machines are shared and noisy: each benchmark compares medians and ratios measured side
# by side in one run, never single absolute times. Run on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TF_CPP_MIN_LOG_LEVEL=2
R=bench/results
mkdir -p "$R"
# Benches that run on every rank start through the sweep's launch line (the same rank placement
# and exports as a sweep point), never a hand-written mpirun line.
launch() { python -m hvdscale.study.sweep.launcher "$@"; }
echo "== harness overhead (issue 3)"
launch --np 2 -- python bench/bench_overhead.py --rounds 16 --json "$R/overhead.json"
echo "== strategies side by side at np=2 (issues 3, 4)"
python bench/bench_strategies.py --np 2 --repeats 5 --json "$R/strategies_np2.json"
echo "== parameter-server communication (issue 4)"
launch --np 2 -- python bench/bench_ps_comm.py --json "$R/ps_comm_np2.json"
launch --np 3 --launcher-args=--oversubscribe -- python bench/bench_ps_comm.py \
  --json "$R/ps_comm_np3.json"
echo "== soak (issue 6)"
python bench/bench_soak.py --steps 1000 --json "$R/soak.json"
if [ -f bench/bench_bucketing.py ]; then
  echo "== bucketing (issue 7)"
  python bench/bench_bucketing.py
fi
echo "== back-test of predict --fit on the seed notes' tables (issue 21; no timing)"
python -m hvdscale backtest --out "$R/backtest.json" --plot "$R/backtest.png" >/dev/null
echo "== Horovod fusion settings (issue 12)"
python bench/bench_fusion.py --fresh
echo "== TensorFlow next to PyTorch (issue 10)"
python bench/bench_frameworks.py --repeats 3 --json "$R/frameworks.json"
launch --np 2 -- python bench/bench_overhead_tf.py --pairs 16 --json "$R/overhead_tf.json"
echo "== GEMMs, op counts, per-rank batch (issue 15)"
python bench/bench_gemm.py --json "$R/gemm.json"
python bench/bench_profile.py --configs configs/nmt_torch.yaml --batch 4 --steps 1 \
  --json "$R/profile_torch.json"
python bench/bench_profile.py --configs configs/nmt_tf.yaml --batch 4 --steps 1 \
  --json "$R/profile_tf.json"
python bench/bench_batch.py --json "$R/batch_demo.json"
echo "== one launch per round against a launch per point (issue 53)"
python bench/bench_shared_launch.py --rounds 3 --np 1,2 --frameworks torch,tf \
  --strategies horovod,ps,independent --sweep-repeats 2 --json "$R/demo_pair_issue53.json"
python bench/bench_shared_launch.py --rounds 5 --np 2 --strategies horovod,ps,independent,ddp \
  --set measure.steps=100 --json "$R/shared_launch_issue53.json"
python bench/bench_shared_launch.py --rounds 5 --np 2 --strategies horovod,ps,independent,ddp \
  --set measure.target_rel_ci=0.02 --set measure.max_seconds=10 \
  --json "$R/precision_target_issue53.json"
