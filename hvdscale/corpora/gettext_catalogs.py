"""A real English-German corpus that needs no download: the translation catalogs of the
programs installed on the machine (compiled gettext ``.mo`` files under the locale directory).

Small, real and odd: about 49,000 pairs on a Debian machine, mostly short user-interface
strings ("Save file", "permission denied"). Good for tests and benchmarks that need real
language; bring WMT (or another real parallel corpus) for real work.

Cleaning: plural and context entries use their first form and drop the context; format
directives (``%s``, ``%(name)s``, ``%1$d``, ``{0}``), markup (``<b>``, ``&amp;``) and keyboard
accelerators (``_File``) are stripped; pairs that end up empty, identical on both sides, or
longer than the cap are dropped, and duplicates (the same English string) keep their first
translation. Tokens are words and single punctuation marks, one sentence per line: the text
format ``data.source: text`` reads.
"""

from __future__ import annotations

import gettext
import re
from dataclasses import dataclass, field
from pathlib import Path

from hvdscale.errors import HvdscaleError

_DIRECTIVE = re.compile(r"%(\([^)]*\))?[-+ #0-9.*$lhLqjzt]*[a-zA-Z%@]|\{[^{}\s]*\}|\$\{?\w+\}?")
_MARKUP = re.compile(r"<[^<>]+>|&[a-zA-Z]+;|&#\d+;")
_ACCEL = re.compile(r"(?<![\w&])[_&](?=\w)")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"[^\W\d_]{2}")  # two letters: a pair of punctuation marks is no sentence


@dataclass
class Extraction:
    """Pairs kept and the counts of what was dropped and why."""

    pairs: dict[str, str] = field(default_factory=dict)
    catalogs: int = 0
    entries: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, why: str) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + 1


def clean(text: str) -> str:
    """One catalog string as space-separated tokens, directives and markup removed."""
    text = _MARKUP.sub(" ", _DIRECTIVE.sub(" ", text))
    text = _ACCEL.sub("", text)
    return " ".join(_TOKEN.findall(text))


def read_catalog(path: Path) -> dict[object, str]:
    """The catalog of one ``.mo`` file (msgid -> translation).

    Raises:
        HvdscaleError: the file is not a readable, valid ``.mo`` catalog.
    """
    try:
        with open(path, "rb") as fp:
            catalog = gettext.GNUTranslations(fp)._catalog  # the whole msgid -> msgstr table
    except UnicodeDecodeError:
        raise  # a valid catalog whose text is not in its declared charset: see extract
    except Exception as e:  # OSError (bad magic), struct.error, IndexError: a garbled file
        raise HvdscaleError(f"{path}: not a valid gettext .mo catalog ({e})") from None
    return catalog


def add_catalog(out: Extraction, catalog: dict[object, str], max_len: int) -> None:
    """Add one catalog's usable pairs to ``out``."""
    out.catalogs += 1
    for key, value in catalog.items():
        if isinstance(key, tuple):  # a plural form: keep the singular, form 0
            if key[1] != 0:
                continue
            key = key[0]
        if key == "":
            continue  # the header entry
        out.entries += 1
        key = str(key).split("\x04", 1)[-1]  # drop a msgctxt
        en, de = clean(key), clean(value)
        if not _WORD.search(en) or not _WORD.search(de):
            out.drop("empty or no words")
        elif en == de:
            out.drop("identical")
        elif len(en.split()) > max_len or len(de.split()) > max_len:
            out.drop("too long")
        elif en in out.pairs:
            out.drop("duplicate")
        else:
            out.pairs[en] = de


def extract(files: list[Path], max_len: int = 50) -> Extraction:
    """The cleaned pairs of these catalogs, in file order."""
    out = Extraction()
    for path in files:
        try:
            catalog = read_catalog(path)
        except UnicodeDecodeError:
            # Some installed catalogs hold text outside their declared charset (m4's is
            # Latin-1 declared as UTF-8): skipped and counted, since the rest are usable.
            out.drop("catalog not in its declared charset")
            continue
        add_catalog(out, catalog, max_len)
    return out


def catalog_files(locale_dir: str, lang: str) -> list[Path]:
    """The ``.mo`` files of ``lang`` under ``locale_dir`` (sorted).

    Raises:
        HvdscaleError: there are none.
    """
    files = sorted(Path(locale_dir, lang, "LC_MESSAGES").glob("*.mo"))
    if not files:
        raise HvdscaleError(f"no .mo catalogs for language {lang!r} under "
                            f"{Path(locale_dir, lang, 'LC_MESSAGES')}")
    return files


def write_corpus(ext: Extraction, out_dir: str, lang: str) -> tuple[Path, Path]:
    """Write ``train.en`` and ``train.<lang>``, line-aligned; returns their paths."""
    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
        src, tgt = d / "train.en", d / f"train.{lang}"
        src.write_text("".join(f"{en}\n" for en in ext.pairs), encoding="utf-8")
        tgt.write_text("".join(f"{de}\n" for de in ext.pairs.values()), encoding="utf-8")
    except OSError as e:
        raise HvdscaleError(f"--out {out_dir}: cannot write the corpus: {e.strerror or e}") \
            from None
    return src, tgt


def summary(ext: Extraction) -> str:
    """Counts for people: catalogs, entries, pairs kept, words, dropped by reason."""
    words = sum(len(en.split()) for en in ext.pairs)
    tw = sum(len(de.split()) for de in ext.pairs.values())
    drops = ", ".join(f"{k} {v}" for k, v in sorted(ext.dropped.items())) or "none"
    return (f"{ext.catalogs} catalogs, {ext.entries} entries: kept {len(ext.pairs)} pairs "
            f"({words} English words, {tw} target words); dropped: {drops}")
