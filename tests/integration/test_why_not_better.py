"""The breakdown of measured points and ``hvdscale predict`` on real records (np=1 and np=2
runs made here, tiny), and predict's errors for bad or missing input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hvdscale.records.run import RunRecord
from hvdscale.records.store import read_records
from hvdscale.study.report import breakdown
from hvdscale.study.report.points import collect

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "TF_CPP_MIN_LOG_LEVEL": "2"}
TINY = ["--set", "measure.warmup_steps=2", "--set", "measure.steps=6",
        "--set", "data.synthetic.sentences_per_rank=128"]

pytestmark = pytest.mark.slow


def hvdscale(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hvdscale", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("why")
    r = hvdscale("sweep", "configs/demo.yaml", "--np", "1,2", "--strategies", "horovod,ps",
                 "--out", str(out), "--no-plot", *TINY)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def test_breakdown_parts_sum_to_the_measured_loss(results: Path) -> None:
    records = [r for r in read_records(results) if isinstance(r, RunRecord)]
    rows = breakdown.breakdowns(records)
    assert sorted((r["strategy"], r["ranks"]) for r in rows) == \
        [("horovod", 2), ("ps (colocated, 1 server)", 2)]
    # Report points are labelled by series ("torch / fused / horovod"): keyed by strategy here.
    effs = {(p.strategy.split(" / ")[-1], p.ranks): p.efficiency
            for exp in collect(records).values() for pts in exp.series.values() for p in pts}
    for r in rows:
        assert "note" not in r, r
        parts = [r[k] for k in breakdown.PARTS]
        assert sum(parts) == pytest.approx(r["loss_pct"], abs=1e-9)
        # The loss is exactly what the report's efficiency leaves (one run per point here).
        eff = effs[(r["strategy"].split(" ")[0], 2)]
        assert r["loss_pct"] == pytest.approx(100.0 - eff, abs=1e-9)
        assert r["efficiency_pct"] == pytest.approx(eff, abs=1e-9)
        assert r["dominant"] == max(breakdown.PARTS, key=lambda k: r[k])
        # No cause below zero, whatever the noise of this run.
        assert all(r[k] >= 0 for k in breakdown.CAUSES), r
        # Straggler idle is the record's own idle time, as a share of the window.
        rec = next(x for x in records if x.ranks == 2 and
                   x.key["strategy"] == r["strategy"].split(" ")[0])
        idle = sum(p.idle_s for p in rec.idle_per_rank) / 2
        assert r["straggler_idle"] == pytest.approx(100 * idle / rec.window_s)
    md = (results / "report.md").read_text()
    # A point run on a busy host carries the report's mark; the row is there either way.
    assert "## Why not better" in md
    assert re.search(r"\|demo \(nmt/torch/fused, weak\)\|horovod( \(busy\))?\|2\|2\|", md), md


def predict(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """``hvdscale predict ARGS`` in this process (each launch would import torch again)."""
    from hvdscale.cli import main

    code = main(["predict", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_predict_validates_against_every_measured_point(results: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    code, out, err = predict(capsys, "configs/demo.yaml", "--ranks", "1,2,4,8,64,512", "--latency",
                 "10us", "--bandwidth", "10Gbit", "--records", str(results), "--json")
    assert code == 0, err
    res = json.loads(out)
    val = res["validation"]
    assert sorted((v["strategy"], v["ranks"]) for v in val) == \
        [("horovod", 1), ("horovod", 2), ("ps", 1), ("ps", 2)]
    for v in val:
        want = 100 * (v["predicted_words_per_s"] - v["measured_words_per_s"]) / \
            v["measured_words_per_s"]
        assert v["error_pct"] == pytest.approx(want)
        assert v["oversubscribed"] is False
    weak = res["prediction"]["scaling"]["weak"]
    assert [p["ranks"] for p in weak["ring-overlap"]] == [1, 2, 4, 8, 64, 512]
    assert weak["ring"][0]["efficiency_pct"] == pytest.approx(100.0)
    # The table form shows the same validation rows.
    code, out, err = predict(capsys, "configs/demo.yaml", "--ranks", "1,2", "--latency", "10us",
                             "--bandwidth", "10Gbit", "--records", str(results))
    assert code == 0, err
    assert "## Validation: predicted vs measured words/s" in out and "|horovod|2|2|" in out
    assert "Unfitted" in out and json.loads(predict(capsys, "configs/demo.yaml", "--ranks", "1",
        "--latency", "1us", "--bandwidth", "1GB/s", "--compute-ms", "5", "--json")[1]
    )["fitted"] is False


def test_predict_reproduces_the_textbook_ring_step(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    """Compute 100 ms per step given; 1 us and 1 GB/s; no overlap: step = compute + the ring
    allreduce of each fused bucket (the demo model fits in one 64 MB bucket)."""
    from hvdscale.config import load_config
    from hvdscale.study.predict import gradient_bytes

    m = sum(gradient_bytes(load_config("configs/demo.yaml")))
    png = tmp_path / "eff.png"
    code, out, err = predict(capsys, "configs/demo.yaml", "--ranks", "1,4", "--latency", "1us",
                             "--bandwidth", "1GB/s", "--compute-ms", "100", "--scaling", "weak",
                             "--json", "--plot", str(png))
    assert code == 0, err
    ring = json.loads(out)["prediction"]["scaling"]["weak"]["ring"]
    assert ring[0]["step_s"] == pytest.approx(0.1)
    assert ring[1]["step_s"] == pytest.approx(0.1 + 6 * 1e-6 + 1.5 * m / 1e9)
    assert ring[1]["efficiency_pct"] == pytest.approx(100 * 0.1 / ring[1]["step_s"])
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_predict_bad_or_missing_input_is_one_clear_error(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "notjson").mkdir()
    (tmp_path / "notjson" / "commbench.json").write_text("{oops")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "commbench.json").write_text(json.dumps({"kind": "x"}))
    (tmp_path / "badrec").mkdir()
    (tmp_path / "badrec" / "results.jsonl").write_text('{"status": "ok"\n')
    (tmp_path / "empty").mkdir()
    base = ["configs/demo.yaml", "--ranks", "1,2"]
    cases = [
        ([*base, "--comm", str(tmp_path / "nowhere")], "no commbench result"),
        ([*base, "--comm", str(tmp_path / "notjson")], "not JSON"),
        ([*base, "--comm", str(tmp_path / "other")], "not a commbench result"),
        ([*base, "--latency", "1us", "--bandwidth", "1GB/s", "--records",
          str(tmp_path / "badrec")], "is not a JSON record"),
        ([*base, "--latency", "1us", "--bandwidth", "1GB/s", "--records",
          str(tmp_path / "nothere")], "no results at"),
        ([*base, "--latency", "1us", "--bandwidth", "1GB/s"], "compute time is missing"),
        ([*base, "--compute-ms", "5"], "network is missing"),
        ([*base, "--latency", "1us", "--bandwidth", "fast", "--compute-ms", "5"], "--bandwidth"),
    ]
    for args, words in cases:
        code, out, err = predict(capsys, *args)
        assert code == 2, (args, err)
        assert words in err and err.startswith("hvdscale: error: "), (args, err)
        assert len(err.strip().splitlines()) == 1 and out == "", err


def test_predict_from_a_damaged_commbench_result_is_one_error(tmp_path: Path) -> None:
    """A launched ``hvdscale predict`` with a commbench result that lost its fits: exit 2."""
    (tmp_path / "commbench.json").write_text(json.dumps(
        {"kind": "commbench", "ranks": 2, "transports": {"mpi4py": {"link": {}}}}))
    r = hvdscale("predict", "configs/demo.yaml", "--comm", str(tmp_path), "--compute-ms", "5",
                 timeout=120)
    assert r.returncode == 2 and "damaged or too small" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
