"""predict's fitted model: each family recovered from a table it generated, held-out error from
points the fit never saw, and one clear error for bad input (also through the CLI)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from hvdscale.cli import main
from hvdscale.errors import HvdscaleError
from hvdscale.records.kinds import typed
from hvdscale.records.run import RunRecord
from hvdscale.study.predict import fit as F
from hvdscale.study.predict.families import (
    FAMILIES,
    expected_max_normal,
    families_for,
    family_names,
)
from hvdscale.study.predict.fitoutput import _params
from hvdscale.study.predict.ownfit import fit_records
from tests.records_fixture import run_dict

NS = list(range(1, 9))
TRUE = {"inv_bandwidth": 0.03, "alpha": 0.011, "sync": 0.2, "sigma": 0.07, "per_rank": 0.05}


def _table(family: str, servers: int) -> list[float]:
    fam = FAMILIES[family]
    return [1.5 + sum(TRUE[t.param] * b for t, b in zip(fam.terms, fam.row(n, 1.0, servers),
                                                          strict=True)) for n in NS]


@pytest.mark.parametrize("strategy", ["horovod", "ps", "independent"])
def test_each_family_is_recovered_with_its_parameters(strategy: str) -> None:
    for fam in family_names(strategy):
        c = F.choose(families_for(strategy), NS, _table(fam, 2), servers=2)
        assert c.fit.family.name == fam, (strategy, fam, c.scores)
        got = {p["name"]: p["value"] for p in c.fit.table()}
        assert got.pop("intercept") == pytest.approx(1.5, rel=1e-9)
        assert got == pytest.approx({t.param: TRUE[t.param] for t in FAMILIES[fam].terms},
                                    rel=1e-6)


def test_held_out_error_comes_from_a_fit_without_that_point() -> None:
    ns = [1, 2, 3, 4, 5]
    y = [1.0, 1.1, 1.2, 1.3, 1.9]  # n=5 off the line the others lie on
    errs = F.held_out_errors(FAMILIES["shared-link"], ns, y)
    # by hand: the line through n=1..4 is 1 + 0.1 (n-1), so 1.4 at n=5
    assert errs[5] == pytest.approx(1.9 / 1.4 - 1, rel=1e-9)
    in_sample = F.fit_family(FAMILIES["shared-link"], ns, y).predict(5)[0]
    assert abs(1.9 / in_sample - 1) < abs(errs[5]) - 0.05  # seeing n=5 would hide the miss


def test_standard_errors_and_interval_grow_with_noise() -> None:
    y = _table("shared-link", 1)
    noisy = [v + (0.01 if i % 2 else -0.01) for i, v in enumerate(y)]
    exact, rough = (F.fit_family(FAMILIES["shared-link"], NS, v) for v in (y, noisy))
    assert exact.table()[1]["se"] == pytest.approx(0.0, abs=1e-12)
    assert rough.table()[1]["se"] > 1e-4
    assert rough.predict(16)[1] > rough.predict(8)[1] > 0  # wider past the measured n


def test_more_parameters_than_points_is_refused() -> None:
    with pytest.raises(HvdscaleError, match=r"parameter.*informative rank count"):
        F.fit_family(FAMILIES["ring"], [1, 2], [1.0, 1.2])
    with pytest.raises(HvdscaleError, match="no communication families for strategy 'x'"):
        families_for("x")


def test_ddp_and_mwms_are_rings() -> None:
    assert family_names("ddp")[0] == family_names("mwms")[0] == "ring"


# ---- own records: crafted, each rank's compute, idle and communication known ----------------

def _rec(strategy: str, n: int, comm: float, exp: int = 0, servers: int = 1) -> dict:
    """A run record's JSON object (``_typed`` reads it as the fit does)."""
    steps, words, c1, g1 = 10, 1000, 1e-3, 0.02
    compute = words * c1 * (1 + 0.05 * (n - 1))
    if strategy == "horovod":  # overlapped (hooks): backward (2/3 of compute) hides comm
        comm = max(0.0, comm - 2 / 3 * compute) if n > 1 else 0.0
    idle = 0.01 * expected_max_normal(n)  # the straggler family's own shape
    rts = [{"rank": r, "words": words, "window_s": 1.0, "steps": steps,
            "step_s": compute + idle + comm + steps * g1, "compute_s": compute}
           for r in range(n)]
    step = rts[0]["step_s"] / steps
    cfg = {"name": "t", "framework": "torch", "model": {"kind": "nmt", "rnn_impl": "fused"},
           "data": {"batch_size": 8 + exp},
           "strategy": {"name": strategy, "ps": {"num_servers": servers}}}
    return run_dict(workers=n, ranks=n, config=cfg, words=n * words, window_s=rts[0]["step_s"],
                    words_per_s=n * words / 10 / step, rank_times=rts,
                    idle={"per_rank": [{"rank": r, "idle_s": idle,
                                        "idle_ms_per_step": 1e3 * idle / steps, "idle_steps": 0,
                                        "compute_s": compute} for r in range(n)]})


def _typed(recs: list[dict]) -> list[RunRecord]:
    """The records as ``hvdscale predict --fit`` reads them from results.jsonl."""
    out = [typed(r) for r in recs]
    assert all(isinstance(r, RunRecord) for r in out)
    return out  # type: ignore[return-value]


def _records() -> list[dict]:
    out = []
    for n in (1, 2, 3, 4):
        out.append(_rec("independent", n, 0.0))
        out.append(_rec("ps", n, 0.1 * (n - 1)))
    return out


def test_own_records_fit_the_shared_link_and_predict_beyond() -> None:
    res = fit_records(_typed(_records()), 1.0, 1, [1, 2, 4, 8])["strategies"]["ps"]
    assert res["family"] in ("ps", "shared-link")  # the same formula with k = 1
    assert res["params"][0]["value"] == pytest.approx(0.1 / 10, rel=1e-6)  # per step
    assert len(res["held_out"]) == 3  # n = 2, 3, 4: not vacuous
    assert all(abs(h["error_pct"]) < 1e-6 for h in res["held_out"].values())
    p8 = res["predictions"][-1]
    assert p8["beyond_measured"] and p8["compute_source"].startswith("1-worker compute")
    assert p8["comm_s"] == pytest.approx(0.7 / 10, rel=1e-6)


def test_overlap_exposes_only_the_part_beyond_backward() -> None:
    recs = [_rec("horovod", n, 0.9 * (n - 1)) for n in (1, 2, 3, 4)]
    two = recs[1]["rank_times"][0]
    assert 0 < two["step_s"] - two["compute_s"] - 0.2 - 0.01 * expected_max_normal(2) < 0.9
    res = fit_records(_typed(recs), 1.0, 1, [8])["strategies"]["horovod"]
    assert res["family"] == "shared-link"
    assert res["params"][0]["value"] == pytest.approx(0.09, rel=1e-6)  # the whole comm
    compute = 1.0 * (1 + 0.05 * 7)
    assert res["predictions"][0]["comm_s"] == pytest.approx((0.9 * 7 - 2 / 3 * compute) / 10)


def _cli(tmp_path: Path, recs: list[dict], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    code = main(["predict", "configs/demo.yaml", "--fit", str(tmp_path), "--ranks", "1,2,8"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case, message", [
    ("one", "one rank count only"), ("mixed", "experiments"),
    ("servers", "torch / fused / ps; torch / fused / ps x2"),
    ("framework", "tf / fused / ps")])
def test_bad_records_give_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture,
                                          case: str, message: str) -> None:
    recs = _records()
    if case == "one":
        recs = [r for r in recs if r["workers"] == 1]
    elif case == "mixed":
        other = copy.deepcopy(recs[-1])
        other["config"]["data"]["batch_size"] = 99
        recs.append(other)
    elif case in ("servers", "framework"):  # another series of the same experiment
        for r in [copy.deepcopy(r) for r in recs if r["config"]["strategy"]["name"] == "ps"]:
            if case == "servers":
                r["config"]["strategy"]["ps"]["num_servers"] = 2
            else:
                r["config"]["framework"] = "tf"
            recs.append(r)
    code, err = _cli(tmp_path, recs, capsys)
    assert code != 0 and message in err and "Traceback" not in err
    assert err.count("\n") == 1


def _powers_of_two() -> list[dict]:
    """ps and the replicas at n = 1, 2, 4, 8, two records each, the ps communication +-3 %."""
    return [_rec(s, n, 0.1 * (n - 1) * (1 + (0.03 * (-1) ** i if s == "ps" else 0)))
            for s in ("ps", "independent") for n in (1, 2, 4, 8) for i in range(2)]


def test_powers_of_two_are_fitted_and_the_missing_n_widen_the_interval(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    res = fit_records(_typed(_powers_of_two()), 1.0, None, [3, 4, 8])["strategies"]["ps"]
    g = res["gaps"]
    assert g["measured"] == [1, 2, 4, 8] and g["missing"] == [3, 5, 6, 7]
    # ps's communication rows: n = 2, 4, 8 (n = 1 has none), 2 records each
    assert g["comm_dof"] == 6 - len(res["params"])
    assert g["comm_dof_if_measured"] == g["comm_dof"] + 8
    assert g["t_widening"] == pytest.approx(F.t975(g["comm_dof"]) / F.t975(g["comm_dof"] + 8))
    assert g["t_widening"] > 1.05
    assert all(v is not None and v > 0 for v in g["interval_pct_at_missing"].values())
    assert set(res["held_out"]) == {2, 4, 8}
    p4 = res["predictions"][1]  # the fitted model still goes through the measured point
    assert p4["comm_s"] == pytest.approx(0.3 / 10, rel=0.05)
    (tmp_path / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _powers_of_two()))
    assert main(["predict", "configs/demo.yaml", "--fit", str(tmp_path), "--ranks", "3,8"]) == 0
    out = capsys.readouterr().out
    assert "- rank counts measured: 1, 2, 4, 8; not measured: 3, 5, 6, 7. The communication " \
           f"fit has {g['comm_dof']} degree(s) of freedom instead of" in out
    contiguous = [r for r in _powers_of_two() if r["workers"] <= 2]
    assert fit_records(_typed(contiguous), 1.0, None, [2])["strategies"]["ps"]["gaps"][
        "missing"] == []


# ---- review fixes: byte scale, degrees of freedom, prediction interval, unphysical fits ------

def _noisy(family: str) -> list[float]:
    return [v + 0.01 * ((-1) ** i) * (1 + i % 3) for i, v in enumerate(_table(family, 1))]


@pytest.mark.parametrize("family", ["ring", "shared-link+straggler"])
def test_uncertainty_does_not_depend_on_the_byte_scale(family: str) -> None:
    y = _noisy(family)  # real S is 1e6-1e8 bytes next to a basis of ~1 (alpha, sigma)
    small, big = (F.fit_family(FAMILIES[family], NS, y, nbytes=s) for s in (1.0, 1e7))
    for n in (8, 16, 64):
        assert big.predict(n)[1] == pytest.approx(small.predict(n)[1], rel=1e-6)
        assert big.half_width(n) == pytest.approx(small.half_width(n), rel=1e-6)
    se = {q["name"]: q["se"] for q in small.table()}
    se_big = {q["name"]: q["se"] for q in big.table()}
    assert se_big["intercept"] == pytest.approx(se["intercept"], rel=1e-6)
    second = FAMILIES[family].terms[1].param  # the small direction pinv(X^T X) dropped
    assert se_big[second] == pytest.approx(se[second], rel=1e-6) and se[second] > 1e-4


def test_n1_without_intercept_adds_no_degree_of_freedom() -> None:
    f = F.fit_family(FAMILIES["shared-link"], [1, 2], [0.0, 0.1], intercept=False)
    assert f.dof == 0 and f.table()[0]["se"] is None
    assert f.predict(1) == (0.0, 0.0) and math.isnan(f.predict(2)[1])
    recs = [_rec(s, n, 0.1 * (n - 1)) for s in ("ps", "independent") for n in (1, 2)]
    res = fit_records(_typed(recs), 1.0, None, [2, 8])["strategies"]["ps"]
    assert all(q["se"] is None for q in res["slowdown"] + res["params"])
    assert "(se unknown)" in _params(res["slowdown"]) and "+- 0" not in _params(res["params"])
    assert res["predictions"][1]["interval"] == [None, None]  # unknown, not a zero width
    # the replicas' slowdown alone unknown (one record at n = 1, 2): still no interval at 8
    recs = [_rec("ps", n, 0.1 * (n - 1)) for n in (1, 2, 3, 4)] + recs[2:]
    res = fit_records(_typed(recs), 1.0, None, [8])["strategies"]["ps"]
    assert res["params"][0]["se"] is not None and res["slowdown"][0]["se"] is None
    assert res["predictions"][0]["interval"] == [None, None]


def test_t_quantiles() -> None:
    from scipy import stats
    for dof in range(1, 80):
        assert F.t975(dof) == pytest.approx(stats.t.ppf(0.975, dof), rel=1e-12)
    assert math.isnan(F.t975(0))


def test_prediction_interval_covers_95_percent_of_new_points() -> None:
    rng = np.random.default_rng(7)
    fam, truth = FAMILIES["shared-link"], lambda n: 1.0 + 0.1 * (n - 1)
    for ns in ([1, 2, 3, 4], [1, 1, 2, 2, 3, 3, 4, 4]):  # dof 2 and 6
        inside = 0
        for _ in range(2000):  # 1.96 x the mean's sd alone would cover 55-85 %
            f = F.fit_family(fam, ns, [truth(n) + rng.normal(0, 0.05) for n in ns])
            new = truth(5) + rng.normal(0, 0.05)
            inside += abs(new - f.predict(5)[0]) <= f.half_width(5)
        assert 0.93 <= inside / 2000 <= 0.97, ns


def test_all_unphysical_fits_are_called_unphysical() -> None:
    y = [1.5 - 0.05 * (n - 1) for n in NS]  # faster with more ranks: no cost explains it
    c = F.choose(families_for("ps"), NS, y)
    assert c.how.startswith("NO PHYSICAL FIT") and "cannot score" not in c.how
    assert "inv_bandwidth = -" in c.how and not F.physical(c.fit)
    ok = F.choose(families_for("ps"), [1, 2], [1.0, 1.1])
    assert "cannot score" in ok.how and F.physical(ok.fit)


def test_ps_servers_come_from_the_records(tmp_path: Path, capsys: pytest.CaptureFixture
                                          ) -> None:
    # k = 2: the servers only become the bottleneck past n = 2 (basis 0, 0, 0.5, 1)
    recs = [_rec(s, n, 1.0 * (max(1, n / 2) - 1), servers=2)
            for s in ("ps", "independent") for n in (1, 2, 3, 4)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["predict", "configs/demo.yaml", "--fit", str(tmp_path), "--ranks", "8",
                 "--json"]) == 0  # demo.yaml says num_servers 1: the records win
    res = json.loads(capsys.readouterr().out)["fit"]
    assert res["servers"] == 2 and res["strategies"]["ps"]["family"] == "ps"
    per_byte = res["strategies"]["ps"]["params"][0]["value"]  # s per byte of the config's S
    assert per_byte * res["bytes_per_step"] == pytest.approx(0.1, rel=1e-6)
    assert main(["predict", "configs/demo.yaml", "--fit", str(tmp_path), "--servers", "1"]) == 2
    assert "num_servers=2" in capsys.readouterr().err


def test_held_out_error_off_the_trend_comes_from_a_fit_that_never_saw_it() -> None:
    """Issue 50: n=5 holds three times the trend's communication. Its held-out prediction is
    the trend's own (the n <= 4 points lie exactly on it), so the miss is the whole jump; a fit
    that saw n=5 would bend toward it and read a smaller miss."""
    five = [_rec("independent", 5, 0.0)]
    trend = fit_records(_typed(_records() + five + [_rec("ps", 5, 0.4)]), 1.0, 1, [5])
    off = fit_records(_typed(_records() + five + [_rec("ps", 5, 1.2)]), 1.0, 1, [5])
    expect = trend["strategies"]["ps"]["held_out"][5]["measured_words_per_s"]
    held = off["strategies"]["ps"]["held_out"][5]
    assert held["predicted_words_per_s"] == pytest.approx(expect, rel=1e-6)
    assert held["error_pct"] == pytest.approx(
        100 * (expect - held["measured_words_per_s"]) / held["measured_words_per_s"], rel=1e-6)
    assert held["error_pct"] > 20  # the trend over-predicts the slow point by far
