"""The e2e engine diff previews each row on a copy of one settled stack (issue 46, `PulumiStack.copy_to`): the copy
has the stack file and the latest state, runs the same program with the same venv, and nothing done to it reaches
the stack it was copied from. The rows run grouped by the before-file they start from."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from offline.runner import ROOT_DIR, read_stack_file
from tests.e2e.engine import PROGRAM_ENTRIES, Engine, PulumiStack
from tests.e2e.test_engine_diff import grouped
from tests.offline.test_plan_diff import ROWS

CHECKPOINT = ".pulumi/stacks/gpu-pool/e2e-up.json"


def deployed_stack(work: Path) -> PulumiStack:
    """A stack's folders as `init` and an `up` leave them (no CLI run: the copy is files only)."""
    stack = PulumiStack(Engine(work / "bin"), work, "e2e-up", path=[work / "tools"], env={"HOME": str(work / "home")})
    stack.project_dir.mkdir(parents=True)
    for entry in PROGRAM_ENTRIES:
        (stack.project_dir / entry).symlink_to(ROOT_DIR / entry)
    (stack.project_dir / ".venv" / "bin").mkdir(parents=True)
    stack.stack_file.write_text("encryptionsalt: v1:salt\nconfig:\n  gpu-pool:rke2Token:\n    secure: v1:cipher\n")
    for name, text in {
        CHECKPOINT: '{"version": 3}',
        f"{CHECKPOINT}.attrs": "{}",
        ".pulumi/meta.yaml": "version: 1\n",
        ".pulumi/history/gpu-pool/e2e-up/e2e-up-1.history.json": "{}",
        ".pulumi/backups/gpu-pool/e2e-up/e2e-up.1.json": "{}",
        ".pulumi/locks/gpu-pool/e2e-up/held.json": "{}",
    }.items():
        (stack.state_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (stack.state_dir / name).write_text(text)
    return stack


def test_a_copy_has_the_stack_file_and_latest_state_and_runs_the_same_program_and_venv(tmp_path: Path) -> None:
    stack = deployed_stack(tmp_path / "shared")

    twin = stack.copy_to(tmp_path / "row")

    assert twin.stack_file.read_text() == stack.stack_file.read_text()
    copied = sorted(str(p.relative_to(twin.state_dir)) for p in twin.state_dir.rglob("*") if p.is_file())
    assert copied == [".pulumi/meta.yaml", CHECKPOINT, f"{CHECKPOINT}.attrs"]
    for entry in PROGRAM_ENTRIES:
        assert (twin.project_dir / entry).resolve() == (ROOT_DIR / entry).resolve()
    assert (twin.project_dir / ".venv").resolve() == (stack.project_dir / ".venv").resolve()
    assert (twin.name, twin.path, twin.env) == (stack.name, stack.path, stack.env)
    assert twin.environment()["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'row' / 'state'}"


def test_what_is_done_to_a_copy_leaves_the_shared_stack_as_it_was(tmp_path: Path) -> None:
    stack = deployed_stack(tmp_path / "shared")
    before = {p: p.read_bytes() for p in stack.work.rglob("*") if p.is_file()}

    twin = stack.copy_to(tmp_path / "row")
    twin.stack_file.write_text("config: {}\n")
    (twin.state_dir / CHECKPOINT).write_text('{"version": 3, "unprotected": true}')

    assert {p: p.read_bytes() for p in stack.work.rglob("*") if p.is_file()} == before


def test_the_rows_run_grouped_by_the_before_file_they_start_from_prods_first() -> None:
    prod = read_stack_file("prod")

    def starts_from(row: object) -> str:
        config = copy.deepcopy(prod)
        row.before(config)  # type: ignore[attr-defined]
        return json.dumps(config, sort_keys=True)

    order = [starts_from(row) for row in grouped(ROWS)]

    assert sorted(grouped(ROWS), key=lambda row: row.name) == sorted(ROWS, key=lambda row: row.name)
    assert order[0] == json.dumps(prod, sort_keys=True)
    runs = [key for i, key in enumerate(order) if i == 0 or order[i - 1] != key]
    assert len(runs) == len(set(order)), "a before-file's rows are split: the shared stack would move to it twice"
    assert len(set(order)) < len(ROWS), "no two rows share a before-file: nothing to group"
