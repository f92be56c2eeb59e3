"""No product function is longer than 80 lines (from its `def` to its last line) unless a comment right above it
says why: a long function has to be read whole to change one thing in it (issue 40). The domain's plan is held
tighter: `plan_domain` reads as a composition of its phases, and no phase builder runs over 60 lines."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("components", "config", "day2", "offline", "benchmarks", "refdata", "knowledge", "node")
LIMIT = 80
PLAN = ROOT / "components" / "gpu_failure_domain" / "plan.py"


def _functions(path: Path) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, int, str]]:
    """Each function of the file, its length in lines and the line right above it (and its decorators)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            above = lines[first - 2].strip() if first >= 2 else ""
            yield node, node.end_lineno - node.lineno + 1, above


def _product_files() -> list[Path]:
    return [ROOT / "__main__.py", *(path for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py")))]


def test_no_product_function_is_longer_than_80_lines_without_a_comment_above_saying_why() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines"
        for path in _product_files()
        for node, length, above in _functions(path)
        if length > LIMIT and not above.startswith("#")
    ]
    assert not long, f"split these, or say above each why it is one piece: {long}"


def test_the_length_check_sees_a_long_function_and_the_comment_that_excuses_it(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    path = tmp_path / "long.py"
    path.write_text(
        f"def long() -> None:\n{body}\n\n# One document: every key has its trap.\ndef kept() -> None:\n{body}"
    )
    found = {node.name: (length, above) for node, length, above in _functions(path)}
    assert found["long"] == (LIMIT + 1, "")
    assert found["kept"] == (LIMIT + 1, "# One document: every key has its trap.")


def test_plan_domain_is_a_short_composition_of_phases_none_over_60_lines() -> None:
    lengths = {node.name: length for node, length, _ in _functions(PLAN)}
    assert lengths["plan_domain"] <= 45, lengths["plan_domain"]
    assert {name: length for name, length in lengths.items() if length > 60} == {}
