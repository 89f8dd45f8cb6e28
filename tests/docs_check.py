"""The documentation check: relative links and ``hvdscale`` command lines in README and docs/.

Two kinds of rot it catches, each reported as ``FILE:LINE: what is wrong``:

- a relative link (``[text](path)``, ``[text](path#anchor)``, ``[text](#anchor)`` or a
  reference definition) whose file is missing or whose anchor is no heading of that page,
  with GitHub's heading slugs (lower case, punctuation dropped, spaces to hyphens, ``-1``,
  ``-2`` for repeats);
- an ``hvdscale SUBCOMMAND ... --option`` in a code block or an inline code span whose
  subcommand or option the command line does not have. The parsers are built from
  :func:`hvdscale.cli.build_parser`, so nothing here lists the options. Only what follows
  ``hvdscale`` up to the end of its command (``|``, ``;``, ``&&``, a comment) is checked: the
  launcher's own options (mpirun, horovodrun, srun) before it are not.

``python tests/docs_check.py`` prints the problems of this checkout (exit 1 when there are any).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
SEPARATORS = {"|", "||", "&&", ";", "&", "|&"}


@dataclass(frozen=True)
class Line:
    """One line of a markdown file: its number, text and whether it is code."""

    number: int
    text: str
    code: bool


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def classify(text: str) -> list[Line]:
    """Split markdown into prose and code lines (fenced, or indented past a list's content).

    A line indented four columns beyond the current list item's content (or beyond the margin
    outside a list) after a blank line or another code line is an indented code block, as in
    CommonMark; an indented line that continues a paragraph is prose.
    """
    out: list[Line] = []
    fenced = False
    content_indent = 0
    prev_blank, prev_code = True, False
    for number, raw in enumerate(text.split("\n"), 1):
        if FENCE.match(raw):
            fenced = not fenced
            out.append(Line(number, raw, True))
            prev_blank, prev_code = False, False
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        blank = not raw.strip()
        code = fenced or (not blank and indent >= content_indent + 4
                          and (prev_blank or prev_code))
        if not code and not blank:
            item = LIST_ITEM.match(raw)
            if item:
                content_indent = len(item.group(0))
            elif indent < content_indent and prev_blank:
                content_indent = 0
        out.append(Line(number, raw, code))
        prev_code = code or (prev_code and blank)
        prev_blank = blank
    return out


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading (before de-duplication)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in classify(text):
        m = None if line.code else HEADING.match(line.text)
        if m:
            slug = github_slug(m.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def link_targets(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every link and reference definition outside code."""
    for line in classify(text):
        if line.code:
            continue
        prose = CODE_SPAN.sub("", line.text)
        for m in LINK.finditer(prose):
            yield line.number, m.group(1)
        ref = REF_DEF.match(prose)
        if ref:
            yield line.number, ref.group(1)


def link_problems(page: Path, root: Path = ROOT) -> list[str]:
    """Broken relative links of one page, as ``FILE:LINE: ...``."""
    problems = []
    cache: dict[Path, set[str]] = {}
    for number, target in link_targets(page.read_text(encoding="utf-8")):
        if not target or SCHEME.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page.resolve()
        where = f"{page.relative_to(root)}:{number}: link {target!r}"
        if not dest.is_relative_to(root.resolve()):
            problems.append(f"{where} leaves the repository")
        elif not dest.exists():
            problems.append(f"{where}: no such file {dest.relative_to(root.resolve())}")
        elif anchor and dest.suffix == ".md":
            if dest not in cache:
                cache[dest] = anchors(dest.read_text(encoding="utf-8"))
            if anchor not in cache[dest]:
                problems.append(f"{where}: no heading with anchor #{anchor} in "
                                f"{dest.relative_to(root.resolve())}")
    return problems


def command_texts(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each code-block command (``\\`` continuations joined) and code span."""
    pending: tuple[int, str] | None = None
    for line in classify(text):
        if not line.code:
            pending = None
            for m in CODE_SPAN.finditer(line.text):
                yield line.number, m.group(2)
            continue
        start, body = pending or (line.number, "")
        body += line.text.strip()
        if body.endswith("\\"):
            pending = (start, body[:-1] + " ")
            continue
        pending = None
        yield start, body


def tokens(command: str) -> list[str]:
    """Shell words of a command line, comments dropped (plain split if the quotes are odd)."""
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split("#", 1)[0].split()


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of a parser by name (empty when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """A parser's option strings and their actions."""
    return {o: a for a in parser._actions for o in a.option_strings}


def check_invocation(words: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """What is wrong with the words after ``hvdscale`` (one command, no separators)."""
    problems = []
    name = "hvdscale"
    i = 0
    while i < len(words):
        word = words[i].strip("[]()")
        subs = subparsers(parser)
        if word.startswith("--") and len(word) > 2:
            opt = word.split("=", 1)[0]
            action = options(parser).get(opt)
            if action is None:
                problems.append(f"`{name}` has no option {opt}")
            elif action.nargs != 0 and "=" not in word:
                i += 1  # its value, which may look like another tool's option
        elif subs and not word.startswith("-"):
            if word not in subs:
                problems.append(f"`{name}` has no subcommand {word!r}")
                return problems
            name, parser = f"{name} {word}", subs[word]
        i += 1
    return problems


def cli_problems(page: Path, parser: argparse.ArgumentParser, root: Path = ROOT) -> list[str]:
    """Unknown ``hvdscale`` subcommands and options named in one page's code."""
    problems = []
    for number, text in command_texts(page.read_text(encoding="utf-8")):
        words = tokens(text)
        for i, word in enumerate(words):
            if word != "hvdscale" and not word.endswith("/hvdscale"):
                continue
            rest = words[i + 1:]
            end = next((j for j, w in enumerate(rest) if w in SEPARATORS), len(rest))
            for problem in check_invocation(rest[:end], parser):
                problems.append(f"{page.relative_to(root)}:{number}: {problem}")
    return problems


def invocations(page: Path) -> Iterator[list[str]]:
    """The words after each ``hvdscale`` named in a page's code (to see the check sees them)."""
    for _, text in command_texts(page.read_text(encoding="utf-8")):
        words = tokens(text)
        for i, word in enumerate(words):
            if word == "hvdscale" or word.endswith("/hvdscale"):
                yield words[i + 1:]


def all_problems(root: Path = ROOT) -> list[str]:
    """Every link and command-line problem of README.md and docs/*.md."""
    from hvdscale.cli import build_parser

    parser = build_parser()
    problems = []
    for page in doc_files(root):
        problems += link_problems(page, root) + cli_problems(page, parser, root)
    return problems + generated_problems(root)


def generated_problems(root: Path = ROOT) -> list[str]:
    """docs/records.md and records.schema.json differing from the record kinds' declarations."""
    from hvdscale.records.docs import outputs

    return [f"{path.relative_to(root)}: out of date; run python -m hvdscale.records.docs"
            for path, text in outputs(root).items()
            if not path.is_file() or path.read_text() != text]


if __name__ == "__main__":
    found = all_problems()
    print("\n".join(found) or "docs: no broken link or unknown hvdscale option")
    sys.exit(1 if found else 0)
