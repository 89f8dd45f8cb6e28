"""``hvdscale gemm`` and ``hvdscale profile`` as a user runs them: tables, records, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hvdscale.study.report.report import write_report
from hvdscale.study.stepcost import profile

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
TINY_MODEL = ["model.embed_dim=8", "model.hidden_size=16", "model.src_vocab=40",
              "model.tgt_vocab=40", "data.batch_size=4", "data.synthetic.length_dist=fixed",
              "data.synthetic.max_len=6", "data.synthetic.sentences_per_rank=32",
              "threads.intra_op=1"]


def _hvdscale(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hvdscale", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def test_gemm_cli_prints_tables_and_writes_record_and_plot(tmp_path: Path) -> None:
    r = _hvdscale("gemm", "--hidden", "8", "--batch", "3,4", "--repeats", "2",
                  "--peak-size", "32", "--min-time", "0.0005", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "|batch|NN|TN|NT|" in r.stdout and "peak" in r.stdout
    (rec,) = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert rec["kind"] == "gemm" and rec["threads"] == 1 and len(rec["loadavg"]["before"]) == 3
    assert len(rec["frameworks"][0]["rows"]) == 6
    assert (tmp_path / "gemm_torch.png").stat().st_size > 0
    assert "GEMM of an RNN layer" in write_report(tmp_path)  # the report shows the record


@pytest.mark.parametrize("args,msg", [
    (["--batch", "16,0"], "--batch entries must be integers"),
    (["--hidden", "abc"], "--hidden entries must be integers"),
    (["--framework", "mxnet"], "unknown framework 'mxnet'"),
    (["--threads", "0"], "--threads must be an integer >= 1"),
])
def test_gemm_bad_input_is_one_clear_error(args: list[str], msg: str, tmp_path: Path) -> None:
    r = _hvdscale("gemm", *args, "--out", str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]  # one line, no traceback
    assert r.stderr.startswith("hvdscale: error: ") and msg in r.stderr


def test_profile_bad_steps_is_one_clear_error(tmp_path: Path) -> None:
    r = _hvdscale("profile", "configs/demo.yaml", "--steps", "0", "--out", str(tmp_path),
                  timeout=60)
    assert r.returncode == 2 and "--steps must be >= 1" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("kind", ["nmt", "lm"])
def test_profile_counts_more_ops_for_loop_than_fused_torch(kind: str) -> None:
    rec = profile.run_profile("configs/demo.yaml",
                              [f"model.kind={kind}", *(f"{o}" for o in TINY_MODEL)], steps=1)
    f, lp = rec.impls["fused"], rec.impls["loop"]
    assert rec.kind == "profile" and rec.framework == "torch"
    assert lp["ops"] > f["ops"] > 0
    assert rec.ratio_loop_fused["ops"] == pytest.approx(lp["ops"] / f["ops"])
    # The compiled loop (issue 41): fewer operators than the eager loop, compiled apart.
    comp = rec.impls["compiled"]
    assert 0 < comp["ops"] < lp["ops"] and comp["compile"]["compile_s"] > 0
    # The loop's extra operators are the RNN's, run in Python step by step.
    assert lp["ops_by_part"]["rnn"] > f["ops_by_part"]["rnn"] > 0
    assert f["ops_by_part"]["softmax"] > 0 and f["ops_by_phase"]["backward"] > 0
    for x in (f, lp):
        assert sum(x["time_split"].values()) == pytest.approx(1.0)
    assert "Number of operators" in profile.markdown(rec)


def test_batch_command_runs_np1_points_beside_the_gemm_curve(tmp_path: Path) -> None:
    env_sets = [a for o in TINY_MODEL for a in ("--set", o)]
    r = _hvdscale("batch", "configs/demo.yaml", "--batch", "2,4", *env_sets,
                  "--set", "measure.warmup_steps=1", "--set", "measure.steps=2",
                  "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    recs = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    runs = [x for x in recs if x.get("kind", "run") == "run"]
    assert sorted(x["config"]["data"]["batch_size"] for x in runs) == [2, 4]
    assert all(x["ranks"] == 1 and x["key"]["strategy"] == "independent" for x in runs)
    (rec,) = [x for x in recs if x.get("kind") == "batch"]
    assert [p["batch"] for p in rec["points"]] == [2, 4]
    assert {(g["batch"], g["variant"]) for g in rec["gemm"]["rows"]} == {
        (b, v) for b in (2, 4) for v in ("NN", "TN", "NT")}
    assert all(g["hidden"] == 16 for g in rec["gemm"]["rows"])
    assert "|batch per rank|words/s|" in r.stdout
    assert "Per-rank batch" in write_report(tmp_path)


def test_profile_counts_more_graph_ops_and_kernels_for_loop_than_fused_tf() -> None:
    pytest.importorskip("tensorflow")
    # The one-layer lm traces fastest; the nmt has the same structure per stack.
    rec = profile.run_profile("configs/demo.yaml", ["framework=tf", "model.kind=lm", *TINY_MODEL],
                              steps=1)
    f, lp = rec.impls["fused"], rec.impls["loop"]
    assert rec.framework == "tf"
    assert lp["graph_ops"] > f["graph_ops"] > 0
    # The loop's per-step cell math lives in while-loop bodies; the fused op has none.
    assert lp["graph_ops_in_loops"] > 0 == f["graph_ops_in_loops"]
    assert lp["kernels"] > f["kernels"] > 0
    assert lp["kernels_by_part"]["rnn"] > f["kernels_by_part"]["rnn"] > 0
    assert f["kernels_by_part"]["softmax"] > 0  # the projection's name scope
    assert rec.ratio_loop_fused["graph_ops"] == pytest.approx(
        lp["graph_ops"] / f["graph_ops"])
    assert "graph ops of the traced train step" in profile.markdown(rec)
