"""README.md and docs/*.md: no broken relative link, no hvdscale subcommand or option the CLI lacks.

The checker (tests/docs_check.py) is first tried on crafted pages, on both sides of each rule,
then run on this checkout's pages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hvdscale.cli import build_parser
from tests.docs_check import (
    ROOT,
    all_problems,
    anchors,
    classify,
    cli_problems,
    doc_files,
    github_slug,
    invocations,
    link_problems,
)


@pytest.fixture(scope="module")
def parser():
    return build_parser()


def _page(tmp_path: Path, name: str, text: str) -> Path:
    page = tmp_path / name
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    return page


@pytest.mark.parametrize("heading, slug", [
    ("TensorFlow's own strategy: `mwms`", "tensorflows-own-strategy-mwms"),
    ("`evidence/gpu_check.sh`", "evidencegpu_checksh"),
    ("Bucketing, whole epochs, weak and strong scaling",
     "bucketing-whole-epochs-weak-and-strong-scaling"),
    ('The report\'s "Time to quality" section', "the-reports-time-to-quality-section"),
    ("Set-up (a fresh Debian 12 machine with Python 3.11)",
     "set-up-a-fresh-debian-12-machine-with-python-311"),
    ("See [the guide](docs/index.md) first", "see-the-guide-first"),
])
def test_github_slug(heading, slug):
    assert github_slug(heading) == slug


def test_repeated_headings_are_numbered_and_code_is_no_heading():
    text = "# A\n\n## Notes\n\n## Notes\n\n    # not a heading\n\n```\n# nor this\n```\n"
    assert anchors(text) == {"a", "notes", "notes-1"}


def test_classify_code_blocks_and_list_continuations():
    text = ("para\n    continued\n\n    code\n\n1. item\n   more\n\n"
            "       code in item\n\n   prose in item\n")
    code = [line.text.strip() for line in classify(text) if line.code]
    assert code == ["code", "code in item"]


def test_links_good_and_broken(tmp_path):
    _page(tmp_path, "docs/b.md", "# B page\n\n## Deep part\n")
    _page(tmp_path, "docs/c.md", "see [c](../docs/b.md)\n")
    good = _page(tmp_path, "README.md",
                 "# Top\n\n[b](docs/b.md) [deep](docs/b.md#deep-part) [self](#top)\n"
                 "[web](https://example.org/x) `[not a link](nowhere.md)`\n\n"
                 "    [code](nowhere.md)\n\n[ref]: docs/b.md\n")
    assert link_problems(good, tmp_path) == []
    bad = _page(tmp_path, "docs/bad.md",
                "# Bad\n\n[gone](missing.md)\n[anchor](b.md#deep)\n[self](#nope)\n"
                "[up](../../outside.md)\n[ref]: gone.md\n")
    problems = link_problems(bad, tmp_path)
    assert len(problems) == 5, problems
    assert problems[0].startswith("docs/bad.md:3: link 'missing.md': no such file")
    assert "no heading with anchor #deep in docs/b.md" in problems[1]
    assert "#nope" in problems[2]
    assert "leaves the repository" in problems[3]
    assert "docs/bad.md:7:" in problems[4]


def test_cli_names_good_and_unknown(tmp_path, parser):
    good = _page(tmp_path, "docs/good.md", (
        "    mpirun -np 2 --oversubscribe hvdscale run configs/demo.yaml --quiet  # --bogus\n"
        "    srun --mpi=pmix hvdscale sweep configs/demo.yaml --np 1,2 \\\n"
        "        --launcher-args '--bind-to none' --dry-run | tee log\n"
        "    hvdscale data gettext --lang de --out x && horovodrun --gloo -np 2 ls\n\n"
        "Inline: `hvdscale fusion configs/demo.yaml --np 2 [--repeats 3]`, `--not-ours`,\n"
        "`hvdscale: error: ...`, `horovodrun -np 2 --gloo hvdscale run c.yaml --set a=b`.\n"))
    assert cli_problems(good, parser, tmp_path) == []
    bad = _page(tmp_path, "docs/bad.md", (
        "    hvdscale sweep configs/demo.yaml --np 1,2 \\\n        --no-such-option\n"
        "    mpirun -np 2 hvdscale frobnicate configs/demo.yaml\n\n"
        "Inline `hvdscale report results/ --plott` and `hvdscale data gettext --langs de`.\n"))
    problems = cli_problems(bad, parser, tmp_path)
    assert problems == [
        "docs/bad.md:1: `hvdscale sweep` has no option --no-such-option",
        "docs/bad.md:3: `hvdscale` has no subcommand 'frobnicate'",
        "docs/bad.md:5: `hvdscale report` has no option --plott",
        "docs/bad.md:5: `hvdscale data gettext` has no option --langs",
    ]


def test_the_check_sees_the_pages_and_the_tour():
    pages = doc_files()
    assert ROOT / "README.md" in pages and ROOT / "docs" / "index.md" in pages
    named = {words[0] for page in pages for words in invocations(page) if words}
    assert {"run", "sweep", "report", "predict", "fusion", "gemm", "commbench"} <= named
    readme = {words[0] for words in invocations(ROOT / "README.md") if words}
    assert {"run", "sweep", "report", "predict"} <= readme


def test_every_docs_page_is_listed_in_the_index():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    pages = [p.name for p in doc_files()[1:] if p.name != "index.md"]
    missing = [name for name in pages if f"({name})" not in index]
    assert not missing, f"docs/index.md does not link {missing}"


def test_readme_and_docs_have_no_broken_link_or_unknown_option():
    problems = all_problems()
    assert not problems, "\n".join(problems)
