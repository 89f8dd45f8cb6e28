"""The benches' scratch directories (issue 29, finding 6): no fixed name in the shared temporary
directory, and a directory someone else planted (a symlink, another user's, one open to others)
is refused, never followed or written into."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from scratch import UnsafeScratch, scratch_dir  # noqa: E402

SCRIPTS = ("bench_predict_validate.py", "bench_comm_model.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_no_fixed_scratch_name(script: str) -> None:
    # A lint only: bench_fusion's behaviour is tested below (issue 39: a grep passed with a
    # fixed folder built without the literal).
    text = (BENCH / script).read_text()
    assert '"/tmp/' not in text, f"{script} still names a fixed directory under /tmp"
    assert "scratch_dir(" in text


class _Planned(Exception):
    """Raised where the fusion bench would start its sweep: the work directory is chosen."""


def _fusion_work_dirs(argv: list[str], runs: int, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directory each of ``runs`` runs of bench_fusion.main() plans its sweep into."""
    import bench_fusion

    seen: list[Path] = []

    def plan(config: Path, grid: object, out: Path, sets: object) -> None:
        seen.append(Path(out).parent)
        raise _Planned

    monkeypatch.setattr(bench_fusion.fusion, "plan_fusion", plan)
    monkeypatch.setattr(sys, "argv", ["bench_fusion.py", *argv])
    for _ in range(runs):
        with pytest.raises(_Planned):
            bench_fusion.main()
    return seen


def test_fusion_bench_takes_a_fresh_private_dir_each_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No --work: each run gets a new 0700 directory of its own in the temporary directory,
    never a name another user could make first (issue 39, bench_fusion.py:107)."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    a, b = _fusion_work_dirs([], 2, monkeypatch)
    assert a != b and a.parent == b.parent == tmp_path, (a, b)
    for d in (a, b):
        st = os.lstat(d)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.geteuid() and d.name.startswith("hvdscale-bench-fusion-")


def test_fusion_bench_uses_the_named_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "mine"
    assert _fusion_work_dirs(["--work", str(work)], 1, monkeypatch) == [work]
    assert stat.S_IMODE(os.lstat(work).st_mode) == 0o700


def test_default_is_fresh_and_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    # Someone planted the old-style names and the prefix itself: the bench takes a new one.
    (tmp_path / "hvdscale-bench-fusion-").mkdir(mode=0o777)
    a, b = scratch_dir(None, "hvdscale-bench-fusion-"), scratch_dir("", "hvdscale-bench-fusion-")
    assert a != b and a.parent == tmp_path
    for d in (a, b):
        st = os.lstat(d)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.geteuid()


def test_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.mkdir(mode=0o700)
    link = tmp_path / "work"
    link.symlink_to(target)
    with pytest.raises(UnsafeScratch, match="is a symlink"):
        scratch_dir(str(link), "x-")
    assert list(target.iterdir()) == []


def test_directory_open_to_others_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "work"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(UnsafeScratch, match="mode 0777"):
        scratch_dir(str(d), "x-")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_another_users_directory_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "work"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)  # nobody: as if another local user had made it first
    with pytest.raises(UnsafeScratch, match="owned by uid 65534"):
        scratch_dir(str(d), "x-")


def test_own_directory_is_made_private_and_reused(tmp_path: Path) -> None:
    d = tmp_path / "a" / "work"
    assert scratch_dir(str(d), "x-") == d
    assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700
    (d / "kept").write_text("a rerun resumes")
    assert scratch_dir(str(d), "x-") == d and (d / "kept").exists()


def test_fusion_bench_refuses_a_planted_work_dir(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_fusion

    target = tmp_path / "victim"
    target.mkdir(mode=0o700)
    (tmp_path / "work").symlink_to(target)
    monkeypatch.setattr(sys, "argv", ["bench_fusion.py", "--work", str(tmp_path / "work")])
    with pytest.raises(SystemExit, match="is a symlink"):
        bench_fusion.main()
    assert list(target.iterdir()) == []
    assert bench_fusion._parser().parse_args([]).work is None


def test_comm_model_reuse_needs_a_named_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_comm_model

    monkeypatch.setattr(sys, "argv", ["bench_comm_model.py"])
    assert bench_comm_model._parse_args().out is None
    monkeypatch.setattr(sys, "argv", ["bench_comm_model.py", "--reuse"])
    with pytest.raises(SystemExit):
        bench_comm_model._parse_args()
