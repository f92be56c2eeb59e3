"""One way to touch a node: no module outside node/ writes a turn-state value, the operator's skip label or its
initial-state annotation, and node/ stands on the standard library and knowledge/ alone (it is packed into every
payload that acts on a node)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from node.vocabulary import TurnState

ROOT = Path(__file__).resolve().parent.parent.parent
# Where a write could come from: every module of the project but node/ itself and the tests.
WRITERS = ("components", "day2", "config", "offline", "benchmarks", "refdata", "knowledge")
# The names a write would use: the label, the annotation, and TurnState's members (`"gpu-pool.dev/turn-state"` as
# a literal counts too).
GUARDED = {"TURN_STATE_LABEL", "DRIVER_UPGRADE_SKIP_LABEL", "DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION"}
LITERALS = {
    "gpu-pool.dev/turn-state",
    "nvidia.com/gpu-driver-upgrade.skip",
    "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
}


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    """Dict displays that use a guarded key (a patch being built), and `set_state`-like calls with a TurnState."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Name) and key.id in GUARDED:
                    found.append((node.lineno, key.id))
                elif isinstance(key, ast.Constant) and key.value in LITERALS:
                    found.append((node.lineno, str(key.value)))
        elif isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "TurnState":
                    found.append((node.lineno, f"TurnState.{arg.attr}"))
    return found


def writes_outside_node(root: Path = ROOT) -> list[str]:
    found = []
    for package in WRITERS:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            found += [f"{path.relative_to(root)}:{line} writes {what}" for line, what in _writes(tree)]
    return found


def test_no_module_outside_node_writes_a_turn_state_the_skip_label_or_the_initial_state_mark() -> None:
    assert writes_outside_node() == []


@pytest.mark.parametrize(
    "source",
    [
        'patch = {"metadata": {"labels": {TURN_STATE_LABEL: "repairing"}}}',
        'patch = {"metadata": {"labels": {"nvidia.com/gpu-driver-upgrade.skip": "true"}}}',
        "patch = {DRIVER_UPGRADE_INITIAL_STATE_ANNOTATION: None}",
        "set_state(turn, TurnState.STOPPED)",
    ],
)
def test_the_check_finds_a_write_outside_node(tmp_path: Path, source: str) -> None:
    (tmp_path / "day2").mkdir()
    (tmp_path / "day2" / "x.py").write_text(source + "\n", encoding="utf-8")
    assert writes_outside_node(tmp_path)


def test_node_imports_the_standard_library_and_knowledge_only() -> None:
    outside = []
    for path in sorted((ROOT / "node").rglob("*.py")):
        for statement in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(statement, ast.Import):
                names = [alias.name for alias in statement.names]
            elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
                names = [statement.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("node", "knowledge", "__future__"):
                    outside.append(f"{path.relative_to(ROOT)} imports {name}")
    assert outside == []


def test_the_turn_states_are_one_closed_set() -> None:
    assert [str(s) for s in TurnState] == ["draining", "changing", "gating", "stopped", "repairing", "done"]
