"""The output blocks of docs/day2.md are real: each command is run again and must print exactly that."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.day2.cli_helpers import ROOT, run

DOC = ROOT / "docs" / "day2.md"
README = ROOT / "README.md"
BLOCK = re.compile(r"```console\n\$ \.venv/bin/(gpu-pool [^\n]*)\n(.*?)```", re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def readme_blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_the_doc_shows_both_commands_on_the_example_dumps() -> None:
    commands = [command for command, _ in blocks()]

    assert any(c.startswith("gpu-pool claims ") for c in commands)
    assert any(c.startswith("gpu-pool doctor ") for c in commands)
    # Reproducible inputs only: the example dumps, or node-check's fixture (a copy of a real node).
    assert all("--from examples/day2/" in c or "--sysfs-root tests/fixtures/node_check/" in c for c in commands)
    assert any(c.startswith("gpu-pool node-check ") for c in commands)
    assert any(c.startswith("gpu-pool doctor ") and "--node-check examples/day2/" in c for c in commands)


def test_the_readme_shows_doctor_on_an_example_dump() -> None:
    assert any(c.startswith("gpu-pool doctor ") and "--from examples/day2/" in c for c, _ in readme_blocks())


@pytest.mark.parametrize(
    ("command", "shown"),
    blocks() + readme_blocks(),
    ids=[command for command, _ in blocks()] + [f"README: {command}" for command, _ in readme_blocks()],
)
def test_each_output_block_is_what_the_command_prints_now(
    command: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    # `repair` reads the Proxmox credential where the preview does: the shown output is the one without it.
    for name in [n for n in os.environ if n.startswith("GPU_POOL_SECRET")]:
        monkeypatch.delenv(name)
    result = run(*shlex.split(command)[1:])

    assert result.err == ""
    assert [line.rstrip() for line in result.out.splitlines()] == [line.rstrip() for line in shown.splitlines()]


def test_the_dump_command_in_the_doc_lists_the_four_kinds_the_tool_reads() -> None:
    from day2.sources import DUMP_COMMAND

    assert DUMP_COMMAND == "kubectl get nodes,pods,configmaps,jobs -A -o json"
    assert f"{DUMP_COMMAND} > dump.json" in DOC.read_text(encoding="utf-8")


def test_the_doc_exists_where_the_readme_can_link_it() -> None:
    assert Path(DOC).is_file()
