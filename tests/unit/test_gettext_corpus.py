"""The gettext corpus: pairs from a tiny .mo file written here; a corrupt one is one clear
error (and the command exits non-zero without a traceback)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from hvdscale.corpora.gettext_catalogs import extract
from hvdscale.errors import HvdscaleError


def write_mo(path: Path, entries: dict[str, str]) -> None:
    """A GNU .mo catalog (the layout msgfmt writes: header, two index tables, strings)."""
    keys = sorted(entries)
    ids = b"".join(k.encode() + b"\0" for k in keys)
    strs = b"".join(entries[k].encode() + b"\0" for k in keys)
    n = len(keys)
    start = 7 * 4 + 16 * n
    koffs, voffs, o = [], [], 0
    for k in keys:
        koffs += [len(k.encode()), start + o]
        o += len(k.encode()) + 1
    o = 0
    for k in keys:
        voffs += [len(entries[k].encode()), start + len(ids) + o]
        o += len(entries[k].encode()) + 1
    head = struct.pack("Iiiiiii", 0x950412DE, 0, n, 7 * 4, 7 * 4 + 8 * n, 0, 0)
    path.write_bytes(head + struct.pack(f"{2 * n}i", *koffs) + struct.pack(f"{2 * n}i", *voffs)
                     + ids + strs)


def test_tiny_catalog_gives_the_expected_pairs(tmp_path: Path) -> None:
    mo = tmp_path / "de" / "LC_MESSAGES" / "tiny.mo"
    mo.parent.mkdir(parents=True)
    write_mo(mo, {
        "": "Content-Type: text/plain; charset=UTF-8\n",
        "Save %s to file": "%s in Datei speichern",
        "_Open <b>recent</b>": "_Zuletzt <b>geöffnet</b>",
        "OK": "OK",                      # identical: dropped
        "%d": "%d",                      # empty once directives go: dropped
        "Quit": "Beenden",
        "menu\x04Quit": "Verlassen",     # same English after the context: a duplicate
        "one two three four five six": "eins zwei drei vier fünf sechs",  # too long (cap 5)
    })
    ext = extract([mo], max_len=5)
    assert ext.pairs == {"Save to file": "in Datei speichern",
                         "Open recent": "Zuletzt geöffnet", "Quit": "Beenden"}
    assert ext.dropped == {"identical": 1, "empty or no words": 1, "duplicate": 1,
                           "too long": 1}
    out = subprocess.run([sys.executable, "-m", "hvdscale", "data", "gettext", "--lang", "de",
                          "--locale-dir", str(tmp_path), "--out", str(tmp_path / "c"),
                          "--max-len", "5"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = (tmp_path / "c" / "train.de").read_text(encoding="utf-8").splitlines()
    assert sorted(lines) == sorted(ext.pairs.values())


def test_corrupt_catalog_is_one_clear_error(tmp_path: Path) -> None:
    mo = tmp_path / "de" / "LC_MESSAGES" / "broken.mo"
    mo.parent.mkdir(parents=True)
    mo.write_bytes(b"\xde\x12\x04\x95" + b"\x00" * 5)  # the magic, then a truncated header
    with pytest.raises(HvdscaleError, match=r"broken\.mo: not a valid gettext \.mo catalog"):
        extract([mo])
    out = subprocess.run([sys.executable, "-m", "hvdscale", "data", "gettext", "--lang", "de",
                          "--locale-dir", str(tmp_path), "--out", str(tmp_path / "c")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "not a valid gettext .mo catalog" in out.stderr and "Traceback" not in out.stderr
