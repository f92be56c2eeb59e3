"""The README and docs/ cannot go stale: every output block is the command's real output now, every test they
cite exists, every relative link and anchor resolves.

An output block is a fenced block right after `<!-- output: NAME -->`; NAME picks the command below. In a
block, a line that is only `…` stands for any number of lines, and `…` inside a line for any text on it (counts
and widths that change with the tree).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTPUT_BLOCK = re.compile(r"<!-- output: (?P<name>[\w-]+) -->\n```[^\n]*\n(?P<body>.*?)```", re.DOTALL)
TEST_REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(test_\w+)")
LINK = re.compile(r"\[[^\]]*\]\((?!https?://|mailto:)([^)#\s]*)(?:#([^)\s]+))?\)")


def _captured(run: Callable[[], int], tmp: Path) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run()
    return out.getvalue().replace(str(tmp), "build/prod"), err.getvalue()


def _preview_tail(tmp: Path) -> str:
    from offline.preview import main

    return _captured(lambda: main(["--stack", "prod", "--out", str(tmp), "--quiet"]), tmp)[0]


def _diff_example(tmp: Path) -> str:
    from offline.diff import main

    return _captured(
        lambda: main(["--stack", "prod", "--before", "examples/diff/Pulumi.prod.yaml", "--out", str(tmp)]), tmp
    )[0]


def _validation_example(tmp: Path) -> str:
    from offline.preview import main

    args = ["--stack", "prod", "--stack-dir", "examples/mistakes", "--out", str(tmp), "--quiet"]
    return _captured(lambda: main(args), tmp)[1]


def _air_gap_inventory(tmp: Path) -> str:
    """What `make preview ARGS=--inventory` prints after the preview's own summary: the air-gap inventory."""
    from offline.preview import main

    out = _captured(lambda: main(["--stack", "prod", "--out", str(tmp), "--quiet", "--inventory"]), tmp)[0]
    return out[out.index("what a node or the cluster fetches") :]


def _make_test_shape(tmp: Path) -> str:
    """The commands `make test` runs, as make prints them, with what each tool prints on success."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    printed = {
        "ruff check": "All checks passed!\n",
        "ruff format": "… files already formatted\n",
        "mypy": "Success: no issues found in … source files\n",
        "pytest": "…\n… passed, … skipped in …\n",
    }
    workers = re.search(r"^TEST_WORKERS \?= (\S+)", makefile, re.MULTILINE)
    assert workers, "no TEST_WORKERS default in the Makefile"
    lines = []
    for target in ("lint", "test"):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        assert recipe, f"no {target} target in the Makefile"
        for command in recipe.group(1).splitlines():
            # Without a --secret in ARGS, NO_ECHO_IF_SECRET expands to nothing and make echoes the command.
            shown = command.strip().replace("$(UV)", ".tools/bin/uv").replace(" $(ARGS)", "")
            shown = shown.replace("$(NO_ECHO_IF_SECRET)", "")
            shown = shown.replace("$(TEST_WORKERS)", workers.group(1))
            lines.append(shown + "\n")
            lines.append(next(text for tool, text in printed.items() if tool in shown))
    return "".join(lines)


OUTPUTS: dict[str, Callable[[Path], str]] = {
    "make-preview-tail": _preview_tail,
    "make-diff-example": _diff_example,
    "validation-example": _validation_example,
    "make-test-shape": _make_test_shape,
    "air-gap-inventory": _air_gap_inventory,
}


def _pattern(block: str) -> re.Pattern[str]:
    parts = []
    for line in block.splitlines():
        if line == "…":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("[^\n]*?".join(re.escape(piece) for piece in line.split("…")) + r"[ \t]*\n")
    return re.compile("".join(parts))


def _blocks() -> list[tuple[str, str, str]]:
    found = []
    for path in DOCS:
        for match in OUTPUT_BLOCK.finditer(path.read_text(encoding="utf-8")):
            found.append((path.relative_to(ROOT).as_posix(), match["name"], match["body"]))
    return found


BLOCKS = _blocks()


def test_every_output_block_names_a_command_the_test_knows() -> None:
    unknown = [(path, name) for path, name, _ in BLOCKS if name not in OUTPUTS and not name.startswith("day2-")]
    assert unknown == []
    assert {name for _, name, _ in BLOCKS} >= set(OUTPUTS)


@pytest.mark.parametrize(
    ("path", "name", "body"),
    [b for b in BLOCKS if b[1] in OUTPUTS],
    ids=[f"{b[0]}:{b[1]}" for b in BLOCKS if b[1] in OUTPUTS],
)
def test_an_output_block_is_what_the_command_prints_now(
    path: str, name: str, body: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(ROOT)
    actual = OUTPUTS[name](tmp_path)
    assert _pattern(body).fullmatch(actual), f"{path}: the {name} block is stale; the command prints:\n{actual}"


def test_the_block_pattern_does_not_match_what_it_should_not() -> None:
    assert _pattern("a\n…\nz 3 … left\n").fullmatch("a\nb\nc\nz 3 files left\n")
    assert not _pattern("a\nz 3 … left\n").fullmatch("a\nb\nz 3 files left\n")
    assert not _pattern("44 resources\n").fullmatch("45 resources\n")


@pytest.mark.parametrize("path", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_every_test_a_page_cites_exists(path: Path) -> None:
    missing = []
    for file, function in TEST_REFERENCE.findall(path.read_text(encoding="utf-8")):
        source = ROOT / file
        if not source.is_file() or not re.search(rf"^def {function}\(", source.read_text(encoding="utf-8"), re.M):
            missing.append(f"{file}::{function}")
    assert missing == []


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


@pytest.mark.parametrize("path", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    broken = []
    for target, anchor in LINK.findall(text):
        resolved = (path.parent / target).resolve() if target else path
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text(encoding="utf-8")):
            broken.append(f"{target}#{anchor}")
    assert broken == []


# What a newcomer needs, in this order; the rest lives in docs/ (the Documentation table links every page).
README_SECTIONS = ("## The two commands", "## Run it on your own lab", "## Day 2", "## Documentation")
# A console block: a command (`$ ...`) and what it prints. tests/day2/test_docs.py runs each gpu-pool one again.
CONSOLE_BLOCK = re.compile(r"```console\n(?P<body>.*?)```", re.DOTALL)
RERUN_CONSOLE = re.compile(r"^\$ \.venv/bin/gpu-pool ", re.MULTILINE)


def _sections(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_the_readme_holds_what_a_newcomer_needs_in_that_order() -> None:
    """What it is (the text before the first section), the two commands, a quickstart for a real lab, day 2 tried on
    a saved dump, and a table of links into docs/: the reader, not a byte budget, decides what the README holds."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = text.split("\n## ", 1)[0]

    assert intro.startswith("# gpu-pool\n") and len(intro.split()) > 50
    assert _sections(text) == list(README_SECTIONS)
    two_commands = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    assert "make preview" in two_commands and "make test" in two_commands


def test_the_readme_s_documentation_table_links_every_page_of_docs() -> None:
    table = (ROOT / "README.md").read_text(encoding="utf-8").split("## Documentation", 1)[1]
    linked = {target for target, _ in LINK.findall(table)}

    assert {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")} <= linked


def test_every_verbatim_output_in_the_docs_is_run_again_by_a_test() -> None:
    """An output block names its command (test_an_output_block_is_what_the_command_prints_now); a console block is
    a gpu-pool command on the example dumps, in docs/day2.md or the README, where tests/day2/test_docs.py runs it."""
    for path in DOCS:
        for block in CONSOLE_BLOCK.finditer(path.read_text(encoding="utf-8")):
            assert path.name in ("day2.md", "README.md"), f"{path.name}: a console block no test runs again"
            assert RERUN_CONSOLE.match(block["body"]), f"{path.name}: {block['body'][:60]!r} is not a gpu-pool command"
