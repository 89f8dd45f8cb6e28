"""Hostfile validation: every bad hostfile is one error naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvdscale.errors import HvdscaleError
from hvdscale.study.sweep.hostfile import parse_hostfile, write_hostfile

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "hosts"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,needle", [
    # malformed lines
    ("node1\n", "hosts:1: malformed hostfile line 'node1' (no slots: write 'node1 slots=N')"),
    ("node1 slots=\n", "hosts:1: malformed hostfile line 'node1 slots='"),
    ("node1 slots=two\n", "(slots must be a whole number, written slots=N)"),
    ("node1 slots=-1\n", "hosts:1: malformed hostfile line 'node1 slots=-1'"),
    ("node1 slots=1.5\n", "hosts:1: malformed hostfile line"),
    ("a slots=1\nnode1:4\n", "hosts:2: malformed hostfile line 'node1:4'"),
    ("node1 slots=2 max_slots=4\n", "hosts:1: malformed hostfile line"),
    ("node 1 slots=2\n", "hosts:1: malformed hostfile line 'node 1 slots=2'"),
    ("slots=2\n", "hosts:1: malformed hostfile line 'slots=2'"),
    ("no/de slots=2\n", "expected 'HOST slots=N', e.g. 'node1 slots=4'"),
    # zero slots
    ("a slots=1\n\nb slots=0\n", "hosts:3: host b has slots=0"),
    # duplicate hosts
    ("a slots=1\nb slots=1\na slots=2\n", "hosts:3: host a is listed twice (first on line 1)"),
    # nothing in it
    ("", "lists no hosts"),
    ("# only a comment\n\n", "lists no hosts"),
])
def test_bad_hostfile_is_one_clear_error(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(HvdscaleError) as e:
        parse_hostfile(_write(tmp_path, text))
    assert needle in str(e.value)
    assert str(tmp_path / "hosts") in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_hostfile(tmp_path: Path) -> None:
    with pytest.raises(HvdscaleError, match=r"hostfile not found: .*nope"):
        parse_hostfile(tmp_path / "nope")


def test_more_ranks_than_slots(tmp_path: Path) -> None:
    hf = parse_hostfile(_write(tmp_path, "a slots=2\nb slots=1\n"))
    hf.check_ranks(3)
    with pytest.raises(HvdscaleError) as e:
        hf.check_ranks(4)
    assert str(e.value) == (f"hostfile {tmp_path / 'hosts'} holds 3 slots (a slots=2, b slots=1); "
                            "4 ranks do not fit: raise slots= or lower --np")


def test_comments_blanks_and_spacing_are_accepted(tmp_path: Path) -> None:
    hf = parse_hostfile(_write(tmp_path, "# cluster\n\n  node-1.example  slots = 4  # gpu\n"
                                         "10.0.0.2 slots=2\n"))
    assert [(h.name, h.slots, h.line) for h in hf.hosts] == [("node-1.example", 4, 3),
                                                             ("10.0.0.2", 2, 4)]
    assert hf.slots == 6


def test_clean_copy_is_read_by_horovodrun_and_matches(tmp_path: Path) -> None:
    """horovodrun's own reader fails on comments; the clean copy reads the same hosts."""
    from horovod.runner.common.util.hosts import parse_host_files

    src = _write(tmp_path, "# two hosts\nh1 slots=2\n\nh2 slots=3 # big\n")
    with pytest.raises(IndexError):
        parse_host_files(str(src))
    clean = write_hostfile(parse_hostfile(src), tmp_path / "clean" / "hosts")
    assert parse_host_files(str(clean)) == "h1:2,h2:3"


@pytest.mark.parametrize("name", ["localhost", "two-nodes"])
def test_shipped_example_hostfiles_are_valid_for_both_readers(name: str) -> None:
    from horovod.runner.common.util.hosts import parse_host_files

    hf = parse_hostfile(ROOT / "hostfiles" / name)
    assert parse_host_files(str(ROOT / "hostfiles" / name)) == ",".join(
        f"{h.name}:{h.slots}" for h in hf.hosts)
