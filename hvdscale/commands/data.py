"""``hvdscale data gettext``: write the machine's gettext catalogs as a parallel corpus."""

from __future__ import annotations

import argparse

NAME = "data"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``data`` parser."""
    p = subparsers.add_parser(NAME, help="make corpora: 'data gettext' writes English-X pairs "
                              "from the installed translation catalogs")
    sub = p.add_subparsers(dest="data_command", required=True)
    g = sub.add_parser("gettext", help="English-LANG pairs from the .mo catalogs on this machine")
    g.add_argument("--lang", default="de", help="target language (a locale dir name: de, fr)")
    g.add_argument("--out", required=True, help="directory for train.en and train.LANG")
    g.add_argument("--locale-dir", default="/usr/share/locale",
                   help="where LANG/LC_MESSAGES/*.mo live")
    g.add_argument("--max-len", type=int, default=50, help="drop pairs longer than this "
                   "(tokens, either side)")
    return p


def handle(args: argparse.Namespace) -> int:
    """Extract, clean, write, and print the counts."""
    from hvdscale.corpora.gettext_catalogs import catalog_files, extract, summary, write_corpus
    from hvdscale.errors import HvdscaleError

    if args.max_len < 1:
        raise HvdscaleError(f"--max-len must be >= 1 (got {args.max_len})")
    ext = extract(catalog_files(args.locale_dir, args.lang), args.max_len)
    if not ext.pairs:
        raise HvdscaleError(f"no usable pairs in the {args.lang} catalogs")
    src, tgt = write_corpus(ext, args.out, args.lang)
    print(summary(ext))
    print(f"wrote {src} and {tgt}")
    return 0
