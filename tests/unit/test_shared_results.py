"""A results directory shared by a group (issue 29, finding 7), with a second real user: the
lock another user made still locks (read-only open), a lock that cannot be opened fails the
preflight before any training, and report files are readable by the group (umask's mode, not
a temporary file's 0600). Needs root to make the throwaway user; skipped otherwise."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.records.kinds import typed
from hvdscale.records.run import RunRecord
from hvdscale.records.store import append_record, check_writable, read_records
from hvdscale.study.plotting import write_atomic
from tests.records_fixture import run_dict

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making a second user needs root")


def _by(who: str) -> dict:
    """The JSON object of a run record whose name says who wrote it."""
    return {**run_dict(), "name": who}


def _rec(who: str) -> RunRecord:
    rec = typed(_by(who))
    assert isinstance(rec, RunRecord)
    return rec


@dataclass
class Colleague:
    """A throwaway user in a throwaway group, and a results directory the group shares."""

    user: str
    group: str
    gid: int
    shared: Path
    lib: Path
    """A copy of msgspec (the record kinds' one dependency) the colleague's Python can read."""

    def python(self, code: str) -> subprocess.CompletedProcess:
        """``code`` run as the colleague (umask 002) by the system's Python, importing this
        worktree's hvdscale (the store and the record kinds need nothing outside the standard
        library but msgspec, copied where the colleague can read it)."""
        prelude = (f"import os, sys; os.umask(0o002); sys.path[:0] = [{str(ROOT)!r}, "
                   f"{str(self.lib)!r}]; ")
        return subprocess.run(["runuser", "-u", self.user, "--", "/usr/bin/python3", "-c",
                               prelude + code], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                   "PYTHONDONTWRITEBYTECODE": "1"})


@pytest.fixture
def colleague() -> Iterator[Colleague]:
    if not (shutil.which("useradd") and shutil.which("runuser")):
        pytest.fail("useradd and runuser (passwd, util-linux) are needed for this test")
    tag = secrets.token_hex(3)
    user, group = f"hvdt{tag}", f"hvdg{tag}"
    subprocess.run(["groupadd", group], check=True)
    top = Path(tempfile.mkdtemp(prefix="hvdscale-shared-"))
    try:
        subprocess.run(["useradd", "-M", "-N", "-g", group, "-s", "/usr/sbin/nologin", user],
                       check=True)
        gid = int(subprocess.run(["getent", "group", group], capture_output=True, text=True,
                                 check=True).stdout.split(":")[2])
        top.chmod(0o755)
        shared = top / "results"
        shared.mkdir()
        os.chown(shared, 0, gid)
        shared.chmod(0o2775)  # group-writable, setgid: new files belong to the group
        lib = top / "lib"
        shutil.copytree(Path(msgspec.__file__).parent, lib / "msgspec")
        yield Colleague(user, group, gid, shared, lib)
    finally:
        subprocess.run(["userdel", user], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_colleague_appends_to_a_lock_made_by_another(colleague: Colleague,
                                                     umask022: None) -> None:
    d = colleague.shared
    append_record(d, _rec("owner"))
    lock = d / "results.jsonl.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o644  # 0666 less the owner's umask 022
    r = colleague.python("import json; from hvdscale.records.kinds import typed; "
                         "from hvdscale.records.store import append_record, check_writable; "
                         f"check_writable({str(d)!r}); append_record({str(d)!r}, "
                         f"typed(json.loads({json.dumps(_by('colleague'))!r})))")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [rec.name for rec in read_records(d)] == ["owner", "colleague"]


def test_lock_is_group_writable_under_a_group_umask(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        append_record(tmp_path, _rec("owner"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "results.jsonl.lock").stat().st_mode) == 0o664


def test_preflight_fails_when_the_lock_cannot_be_opened(colleague: Colleague,
                                                        umask022: None) -> None:
    d = colleague.shared
    append_record(d, _rec("owner"))
    (d / "results.jsonl.lock").chmod(0o600)  # a private lock: the colleague cannot open it
    r = colleague.python("from hvdscale.records.store import check_writable; "
                         "from hvdscale.errors import HvdscaleError\n"
                         "try:\n"
                         f"    check_writable({str(d)!r})\n"
                         "except HvdscaleError as e:\n"
                         "    print('refused:', e); sys.exit(7)\n")
    assert r.returncode == 7, (r.stdout, r.stderr[-2000:])
    assert "results.jsonl.lock cannot be opened" in r.stdout
    # The owner, for whom the lock opens, passes the same preflight.
    check_writable(d)


def test_preflight_passes_for_the_colleague_on_a_shared_lock(colleague: Colleague,
                                                             umask022: None) -> None:
    append_record(colleague.shared, _rec("owner"))
    r = colleague.python(f"from hvdscale.records.store import check_writable; "
                         f"check_writable({str(colleague.shared)!r})")
    assert r.returncode == 0, r.stderr[-2000:]


def test_reports_are_readable_by_the_group(colleague: Colleague, umask022: None) -> None:
    d = colleague.shared
    for name in ("report.md", "report.csv", "scaling.png"):
        write_atomic(d / name, b"x\n")  # how report.md, report.csv and the plots are written
        assert stat.S_IMODE((d / name).stat().st_mode) == 0o644, name
        r = subprocess.run(["runuser", "-u", colleague.user, "--", "cat", str(d / name)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout == "x\n", (name, r.stderr)
    (d / "report.md").chmod(0o600)  # an older report, written 0600 before this fix
    write_atomic(d / "report.md", b"y\n")
    assert stat.S_IMODE((d / "report.md").stat().st_mode) == 0o644


def test_preflight_error_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(HvdscaleError, match=r"results\.jsonl\.lock cannot be opened"):
        check_writable(tmp_path)
