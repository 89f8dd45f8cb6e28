"""The results directory's checks before training (hvdscale.records.store.check_writable) at
their limits, on a real filesystem of known size (issue 39, mutation survivors): the free space
a record needs to the byte, the default need, nested directories, no probe left behind, and
each refusal's line whole."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.records import store
from hvdscale.records.store import append_record, check_writable
from tests.records_fixture import run_dict, run_record
from tests.tmpfs import mounted_tmpfs


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 1.5 MiB tmpfs (root only), unmounted afterwards."""
    yield from mounted_tmpfs(tmp_path / "small", "1536k")


def _free(d: Path) -> int:
    st = os.statvfs(d)
    return st.f_bavail * st.f_frsize


def _refusal(d: Path, **kw: int) -> str:
    with pytest.raises(HvdscaleError) as e:
        check_writable(d, **kw)
    return str(e.value)


def test_a_record_needs_its_bytes_plus_the_file_again_to_the_byte(small_fs: Path) -> None:
    check_writable(small_fs)  # 1 MiB by default, 1.5 MiB free: fine (and the lock is made)
    assert sorted(p.name for p in small_fs.iterdir()) == ["results.jsonl.lock"]  # no probe
    free = _free(small_fs)
    check_writable(small_fs, need_bytes=free)  # no results file yet: exactly enough
    assert _refusal(small_fs, need_bytes=free + 1) == (
        f"results directory {small_fs} has only {free} bytes free; a record needs {free + 1}")
    (small_fs / "results.jsonl").write_bytes(b"x" * 4096)  # an append rewrites it: twice
    free = _free(small_fs)
    check_writable(small_fs, need_bytes=free - 4096)
    assert _refusal(small_fs, need_bytes=free - 4095) == (
        f"results directory {small_fs} has only {free} bytes free; a record needs {free + 1}")
    (small_fs / "results.jsonl").write_bytes(b"x" * (700 << 10))  # 700 KiB: 1 MiB more won't fit
    assert "bytes free" in _refusal(small_fs)


def test_nested_directories_are_made(tmp_path: Path) -> None:
    assert check_writable(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()


def test_each_refusal_reads_in_full(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    assert _refusal(f) == (f"results directory {f} is an existing file, not a directory; give "
                           "--out a directory (it is created if missing)")
    assert _refusal(f / "sub") == f"results directory {f / 'sub'} is not writable: Not a directory"
    (tmp_path / "d" / "results.jsonl").mkdir(parents=True)  # the results file: a directory
    assert _refusal(tmp_path / "d") == (
        f"{tmp_path / 'd' / 'results.jsonl'} cannot be opened: Is a directory; a record could not "
        "be written there (in a shared results directory, ask its owner to make it readable and "
        "writable by the group)")


def test_an_append_writes_one_sorted_line_and_never_glues_two(tmp_path: Path) -> None:
    d = tmp_path / "a" / "b"  # made as needed
    rec = run_record(final_loss=float("nan"))  # NaN is a value a run can record
    append_record(d, rec)
    f = d / "results.jsonl"
    text = f.read_text()
    assert text == json.dumps(rec.to_dict(), sort_keys=True, allow_nan=True) + "\n"
    assert text.count("\n") == 1 and '"final_loss": NaN' in text
    assert list(json.loads(text)) == sorted(json.loads(text))
    one = text.rstrip("\n")
    f.write_text(one)  # edited by hand, no newline at its end
    append_record(d, rec)
    assert f.read_text() == f"{one}\n{one}\n"


def test_a_taken_temporary_name_is_skipped_and_no_free_one_is_one_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The names are random; a collision is forced by fixing what the random source returns.
    target = tmp_path / "results.jsonl"
    taken = tmp_path / f".results.jsonl.{os.getpid()}.aaaa.tmp"
    taken.write_text("")
    draws = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(store.secrets, "token_hex", lambda n: next(draws))
    fd, name = store.temp_beside(target)
    os.close(fd)
    assert name == str(tmp_path / f".results.jsonl.{os.getpid()}.bbbb.tmp")
    calls: list[int] = []
    monkeypatch.setattr(store.secrets, "token_hex", lambda n: calls.append(n) or "aaaa")
    with pytest.raises(FileExistsError) as e:
        store.temp_beside(target)
    assert str(e.value) == f"no free temporary name beside {target}" and calls == [4] * 100


def test_every_bad_results_file_is_named_with_its_line(tmp_path: Path) -> None:
    def refused(p: Path | str) -> str:
        with pytest.raises(HvdscaleError) as e:
            store.load_records(p)
        return str(e.value)

    assert refused(tmp_path / "none") == f"no results at {tmp_path / 'none'}"
    f = tmp_path / "results.jsonl"
    a, b = json.dumps(run_dict("name=a")), json.dumps(run_dict("name=b"))
    f.write_text(f"{a}\n\n{b}\n")  # a blank line is skipped, not the end
    assert [(w, r.name) for w, r in store.load_records(tmp_path)] == [(f"{f}:1", "a"),
                                                                       (f"{f}:3", "b")]
    f.write_bytes(a.encode() + b'\n\xff\n')
    assert refused(f) == f"{f}:2 is not UTF-8 text; is it a results.jsonl file?"
    f.write_text(f"{a}\nnot json\n")
    assert refused(f) == f"{f}:2 is not a JSON record"
    f.write_text(f'{a}\n{{"a": 1}}\n')  # an object, but no record of any kind
    assert refused(f) == f"{f}:2: field 'status' of a run record is missing"
    f.write_text("[" + ", ".join(["1"] * 30) + "]\n")
    assert refused(f) == (f"{f}:1 is not a JSON record (an object {{...}}), but list "
                          "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, ")
    # A real read error: the kernel refuses to read this process's memory file like this.
    assert refused("/proc/self/mem") == ("results file /proc/self/mem cannot be read: "
                                         "Input/output error")
