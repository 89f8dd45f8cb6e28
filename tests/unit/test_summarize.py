"""tests/summarize.py fails CI when a phase tested nothing or a test skipped unexpectedly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import summarize

PS = "tests.mpi.test_exactness.test_ps_equals_one_process_and_horovod[colocated-1]"


def _case(test: str, state: str, reason: str = "") -> str:
    cls, name = test.rsplit(".", 1)
    body = {"passed": "", "failed": '<failure message="boom">boom</failure>',
            "skipped": f'<skipped type="pytest.skip" message="{reason}">{reason}</skipped>'}[state]
    return f'<testcase classname="{cls}" name="{name}" time="0.1">{body}</testcase>'


def _junit(d: Path, stem: str, *cases: str) -> None:
    d.mkdir(exist_ok=True)
    (d / f"{stem}.xml").write_text(
        f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{"".join(cases)}'
        "</testsuite></testsuites>")


def _all_green(d: Path) -> None:
    _junit(d, "single", _case("tests.unit.test_a.test_one", "passed"))
    for launch in summarize.LAUNCHES[1:]:
        for rank in range(2):
            _junit(d, f"{launch}-rank{rank}", _case("tests.mpi.test_b.test_two", "passed"))


def test_green_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _all_green(tmp_path)
    assert summarize.main(str(tmp_path), []) == 0
    passed = len(summarize.LAUNCHES)  # one test per launch
    assert f"tests: {passed} passed, 0 failed, 0 skipped" in capsys.readouterr().out


def test_a_phase_where_everything_skipped_fails(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    _all_green(tmp_path)
    for rank in range(2):
        _junit(tmp_path, f"horovodrun-gloo-np2-rank{rank}",
               _case(PS, "skipped", "the parameter server needs an MPI launch"))
    assert summarize.main(str(tmp_path), []) == 1
    assert "FAILED launch horovodrun-gloo-np2: no test passed" in capsys.readouterr().out


def test_a_phase_without_junit_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _all_green(tmp_path)
    for rank in range(2):
        (tmp_path / f"mpirun-np3-rank{rank}.xml").unlink()
    assert summarize.main(str(tmp_path), []) == 1
    assert "FAILED launch mpirun-np3" in capsys.readouterr().out


def test_only_listed_skips_with_their_reason_pass(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    _all_green(tmp_path)
    _junit(tmp_path, "horovodrun-gloo-np2-rank1", _case("tests.mpi.test_b.test_two", "passed"),
           _case(PS, "skipped", "the parameter server needs an MPI launch"))
    assert summarize.main(str(tmp_path), []) == 0
    # The same test skipped under mpirun, or for another reason, is not expected.
    _junit(tmp_path, "mpirun-np2-rank1", _case("tests.mpi.test_b.test_two", "passed"),
           _case(PS, "skipped", "the parameter server needs an MPI launch"))
    assert summarize.main(str(tmp_path), []) == 1
    assert "UNEXPECTED SKIP [mpirun-np2] " + PS in capsys.readouterr().out
    _all_green(tmp_path)
    _junit(tmp_path, "single", _case("tests.unit.test_a.test_one", "passed"),
           _case("tests.unit.test_a.test_new", "skipped", "needs a GPU"))
    assert summarize.main(str(tmp_path), []) == 1
    assert "UNEXPECTED SKIP [single] tests.unit.test_a.test_new: 'needs a GPU'" in (
        capsys.readouterr().out)


def test_a_failure_on_one_rank_or_a_failed_phase_fails(tmp_path: Path) -> None:
    _all_green(tmp_path)
    assert summarize.main(str(tmp_path), ["lint"]) == 1
    _junit(tmp_path, "mpirun-np2-rank1", _case("tests.mpi.test_b.test_two", "failed"))
    assert summarize.main(str(tmp_path), []) == 1


def test_only_the_listed_cases_of_a_parametrized_test_may_skip(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture
                                                               ) -> None:
    # test_same_weights_same_eval_loss has 6 cases; under --gloo only its 2 ps cases skip.
    test = "tests.mpi.test_eval_same.test_same_weights_same_eval_loss"
    why = "mpi4py point-to-point needs an MPI launch, not --gloo"
    _all_green(tmp_path)
    _junit(tmp_path, "horovodrun-gloo-np2-rank0", _case("tests.mpi.test_b.test_two", "passed"),
           *(_case(f"{test}[{src}-ps]", "skipped", why) for src in ("mapped", "markov")))
    assert summarize.main(str(tmp_path), []) == 0
    _junit(tmp_path, "horovodrun-gloo-np2-rank0", _case("tests.mpi.test_b.test_two", "passed"),
           _case(f"{test}[mapped-horovod]", "skipped", why))
    assert summarize.main(str(tmp_path), []) == 1
    assert f"UNEXPECTED SKIP [horovodrun-gloo-np2] {test}[mapped-horovod]" in (
        capsys.readouterr().out)
