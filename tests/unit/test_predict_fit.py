"""predict's fitted model: each family recovered from a table it generated, held-out error from
points the fit never saw, and one clear error for bad input (also through the CLI)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hvdscale.cli import main
from hvdscale.errors import HvdscaleError
from hvdscale.study.predict import fit as F
from hvdscale.study.predict.families import (
    FAMILIES,
    STRATEGY_FAMILIES,
    expected_max_normal,
    families_for,
)
from hvdscale.study.predict.ownfit import fit_records

NS = list(range(1, 9))
TRUE = {"inv_bandwidth": 0.03, "alpha": 0.011, "sync": 0.2, "sigma": 0.07, "per_rank": 0.05}


def _table(family: str, servers: int) -> list[float]:
    fam = FAMILIES[family]
    return [1.5 + sum(TRUE[t.param] * b for t, b in zip(fam.terms, fam.row(n, 1.0, servers),
                                                          strict=True)) for n in NS]


@pytest.mark.parametrize("strategy", ["horovod", "ps", "independent"])
def test_each_family_is_recovered_with_its_parameters(strategy: str) -> None:
    for fam in STRATEGY_FAMILIES[strategy]:
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
    assert STRATEGY_FAMILIES["ddp"][0] == STRATEGY_FAMILIES["mwms"][0] == "ring"


# ---- own records: crafted, each rank's compute, idle and communication known ----------------

def _rec(strategy: str, n: int, comm: float, exp: int = 0) -> dict:
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
           "data": {"batch_size": 8 + exp}, "strategy": {"name": strategy}}
    return {"status": "ok", "kind": "run", "workers": n, "ranks": n, "config": cfg,
            "words": n * words, "window_s": rts[0]["step_s"], "words_per_s": n * words / 10 / step,
            "rank_times": rts, "idle": {"per_rank": [{"rank": r, "idle_s": idle}
                                                      for r in range(n)]}}


def _records() -> list[dict]:
    out = []
    for n in (1, 2, 3, 4):
        out.append(_rec("independent", n, 0.0))
        out.append(_rec("ps", n, 0.1 * (n - 1)))
    return out


def test_own_records_fit_the_shared_link_and_predict_beyond() -> None:
    res = fit_records(_records(), 1.0, 1, [1, 2, 4, 8])["strategies"]["ps"]
    assert res["family"] in ("ps", "shared-link")  # the same formula with k = 1
    assert res["params"][0]["value"] == pytest.approx(0.1 / 10, rel=1e-6)  # per step
    assert all(abs(h["error_pct"]) < 1e-6 for h in res["held_out"].values())
    p8 = res["predictions"][-1]
    assert p8["beyond_measured"] and p8["compute_source"].startswith("1-worker compute")
    assert p8["comm_s"] == pytest.approx(0.7 / 10, rel=1e-6)


def test_overlap_exposes_only_the_part_beyond_backward() -> None:
    recs = [_rec("horovod", n, 0.9 * (n - 1)) for n in (1, 2, 3, 4)]
    two = recs[1]["rank_times"][0]
    assert 0 < two["step_s"] - two["compute_s"] - 0.2 - 0.01 * expected_max_normal(2) < 0.9
    res = fit_records(recs, 1.0, 1, [8])["strategies"]["horovod"]
    assert res["family"] == "shared-link"
    assert res["params"][0]["value"] == pytest.approx(0.09, rel=1e-6)  # the whole comm
    compute = 1.0 * (1 + 0.05 * 7)
    assert res["predictions"][0]["comm_s"] == pytest.approx((0.9 * 7 - 2 / 3 * compute) / 10)


def _cli(tmp_path: Path, recs: list[dict], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    code = main(["predict", "configs/demo.yaml", "--fit", str(tmp_path), "--ranks", "1,2,8"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case, message", [
    ("one", "one rank count only"), ("mixed", "experiments"), ("gap", "misses n = 2")])
def test_bad_records_give_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture,
                                          case: str, message: str) -> None:
    recs = _records()
    if case == "one":
        recs = [r for r in recs if r["workers"] == 1]
    elif case == "mixed":
        other = copy.deepcopy(recs[-1])
        other["config"]["data"]["batch_size"] = 99
        recs.append(other)
    else:
        recs = [r for r in recs if r["workers"] != 2]
    code, err = _cli(tmp_path, recs, capsys)
    assert code != 0 and message in err and "Traceback" not in err
    assert err.count("\n") == 1
