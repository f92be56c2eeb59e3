"""The component registers every kind of step, and mypy refuses a kind without its branch.

The promise in steps.py and component.py ("a new kind without its branch fails mypy") is checked here on the
result: the `match` has exactly one branch per member of the `Step` union, and mypy, run on the component with one
branch removed (`--shadow-file`, the rest of the tree as it is), names that kind at `assert_never`.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path

from components.gpu_failure_domain import steps

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "components" / "gpu_failure_domain" / "component.py"


def _register_match() -> ast.Match:
    tree = ast.parse(COMPONENT.read_text(encoding="utf-8"))
    register = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_register")
    return next(n for n in ast.walk(register) if isinstance(n, ast.Match))


def _branch_kinds(match: ast.Match) -> list[str]:
    return [
        c.pattern.cls.id
        for c in match.cases
        if isinstance(c.pattern, ast.MatchClass) and isinstance(c.pattern.cls, ast.Name)
    ]


def test_the_component_has_one_branch_per_kind_of_step_and_ends_in_assert_never() -> None:
    match = _register_match()
    kinds = sorted(t.__name__ for t in typing.get_args(steps.Step))

    assert sorted(_branch_kinds(match)) == kinds
    last = match.cases[-1]
    assert isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
    assert "assert_never(step)" in ast.unparse(last.body[0])


def test_mypy_refuses_the_component_when_a_kind_of_step_loses_its_branch(tmp_path: Path) -> None:
    source = COMPONENT.read_text(encoding="utf-8")
    match = _register_match()
    branch = next(
        c for c in match.cases if isinstance(c.pattern, ast.MatchClass) and ast.unparse(c.pattern) == "VmStep()"
    )
    lines = source.splitlines(keepends=True)
    start = branch.pattern.lineno - 1
    end = branch.body[-1].end_lineno or branch.pattern.lineno
    shadow = tmp_path / "component.py"
    shadow.write_text("".join(lines[:start] + lines[end:]), encoding="utf-8")
    # A copy of make lint's cache (the Makefile's MYPY_CACHE_DIR), so only the shadowed module is checked again
    # and the shared cache never holds the broken component.
    cache = tmp_path / "mypy-cache"
    shared = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-pool" / "mypy"
    if shared.is_dir():
        shutil.copytree(shared, cache)
    env = {**os.environ, "MYPY_CACHE_DIR": str(cache)}

    mypy = subprocess.run(
        [sys.executable, "-m", "mypy", "--shadow-file", str(COMPONENT), str(shadow), str(COMPONENT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )

    assert mypy.returncode == 1, mypy.stdout + mypy.stderr
    assert 'Argument 1 to "assert_never" has incompatible type "VmStep"' in mypy.stdout
