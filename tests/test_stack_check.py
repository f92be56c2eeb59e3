"""One validation of a stack, up to what it renders, for every entry point that reads one: the preview (the
program), `make diff`, and the day-2 command's `--stack` (doctor, claims, repair, node-check) refuse the same
stack files with the same messages, in the same order; and no rule depends on what a process imported first.

Each stack file below is prod's, broken one way a user breaks it, written to disk and read by each entry point as
a user runs it (in-process, as the docs tests run them).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from day2.cli import main as gpu_pool
from offline.diff import main as make_diff
from offline.preview import main as make_preview
from offline.runner import ROOT_DIR

PROD = ROOT_DIR / "Pulumi.prod.yaml"
DUMP = ROOT_DIR / "examples" / "day2" / "healthy-pool.json"
Config = dict[str, Any]


def _edited(change: Callable[[Config], None]) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        document = yaml.safe_load(PROD.read_text(encoding="utf-8"))
        change(document["config"])
        (folder / PROD.name).write_text(yaml.safe_dump(document), encoding="utf-8")

    return write


def _leading_zero(folder: Path) -> None:
    text = PROD.read_text(encoding="utf-8")
    assert "vmId: 4101" in text
    (folder / PROD.name).write_text(text.replace("vmId: 4101", "vmId: 04101"), encoding="utf-8")


def _mistakes(folder: Path) -> None:
    (folder / PROD.name).write_bytes((ROOT_DIR / "examples" / "mistakes" / PROD.name).read_bytes())


# How each stack file is broken, and a message every entry point must give for it.
BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    "a rule on the rendered plan": (
        _edited(lambda c: c["gpu-pool:gpuOperator"].update(driverResources={"limits": {"memory": "512Mi"}})),
        "gpu-pool:gpuOperator.driverResources.limits.memory: the driver container's memory limit 512Mi is below",
    ),
    "a key under a misspelt prefix": (
        _edited(lambda c: c.update({"gpu-poll:smokeTest": {"enabled": False}})),
        "gpu-poll:smokeTest: 'gpu-poll' is not this project's prefix; write it as gpu-pool:smokeTest",
    ),
    "an integer with a leading zero": (
        _leading_zero,
        "gpu-pool:failureDomains[dc1].vmId: written 04101, which YAML reads as the octal number 2113",
    ),
    "a secret in plain text": (
        _edited(lambda c: c.update({"gpu-pool:rke2Token": "K10abc::server:abc"})),
        "gpu-pool:rke2Token: the RKE2 join token is in the stack file in plain text",
    ),
    "an unknown key": (
        _edited(lambda c: c.update({"gpu-pool:rke2Versoin": "v1.33.5+rke2r1"})),
        "gpu-pool:rke2Versoin: unknown config key",
    ),
    "the mistakes example": (_mistakes, "gpu-pool:failureDomains[dc2].vmId: written 04201"),
}


def _captured(run: Callable[[], int]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = run()
    return code, err.getvalue()


def _indented_after(text: str, heading: str) -> list[str]:
    if heading not in text:
        return []
    lines = text.split(heading, 1)[1].splitlines()[1:]
    return [line[2:] for line in lines if line.startswith("  ")]


def preview_refusal(folder: Path, out: Path) -> tuple[int, list[str]]:
    code, err = _captured(
        lambda: make_preview(["--stack", "prod", "--stack-dir", str(folder), "--out", str(out), "--quiet"])
    )
    return code, _indented_after(err, "invalid stack config:")


def diff_refusal(folder: Path, out: Path) -> tuple[int, list[str]]:
    argv = ["--stack", "prod", "--before", str(PROD), "--after", str(folder / PROD.name), "--out", str(out)]
    code, err = _captured(lambda: make_diff(argv))
    return code, _indented_after(err, "error: the current stack config is refused: invalid stack config:")


DAY2: dict[str, Callable[[Path], list[str]]] = {
    "doctor": lambda folder: ["doctor", "--from", str(DUMP), "--stack-dir", str(folder), "-o", "json"],
    "claims": lambda folder: ["claims", "--from", str(DUMP), "--stack-dir", str(folder), "-o", "json"],
    "repair": lambda folder: ["repair", "rke2-worker-dc2-gpu-a", "--from", str(DUMP), "--stack-dir", str(folder)],
    "node-check": lambda folder: ["node-check", "--node", "rke2-worker-dc1-gpu-a", "--stack-dir", str(folder)],
}


def day2_refusal(command: str, folder: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [*DAY2[command](folder), "--stack", "prod"]
    if command == "node-check":
        argv.append("--print-flags")
    return gpu_pool(argv, out=out, err=err), err.getvalue().strip()


@pytest.fixture(params=list(BROKEN), ids=list(BROKEN))
def broken(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    write, message = BROKEN[request.param]
    folder = tmp_path / "stack"
    folder.mkdir()
    write(folder)
    return folder, message


def test_the_preview_and_make_diff_refuse_each_broken_stack_file_with_the_same_messages(
    broken: tuple[Path, str], tmp_path: Path
) -> None:
    folder, message = broken
    code, messages = preview_refusal(folder, tmp_path / "preview")
    assert code == 1 and any(m.startswith(message) for m in messages), messages
    diff_code, diff_messages = diff_refusal(folder, tmp_path / "diff")
    assert (diff_code, diff_messages) == (2, messages)


@pytest.mark.parametrize("command", list(DAY2))
def test_each_day2_command_refuses_each_broken_stack_file_with_the_previews_messages_in_its_order(
    broken: tuple[Path, str], tmp_path: Path, command: str
) -> None:
    folder, message = broken
    _, messages = preview_refusal(folder, tmp_path / "preview")
    code, err = day2_refusal(command, folder)
    assert code == 2
    assert err == f"gpu-pool: --stack prod: Pulumi.prod.yaml is not valid: {'; '.join(messages)}"
    assert message in err


def test_the_rendered_rules_run_in_a_process_that_imported_nothing_else_first() -> None:
    # The rules once ran only where `components` had been imported before the config was read (an import-time
    # registry); a fresh interpreter that imports the one validation alone must refuse what the preview refuses.
    script = (
        "import sys, yaml\n"
        "from components.stack_check import validate_stack\n"
        "from config.errors import ConfigError\n"
        "raw = {k.split(':', 1)[1]: v for k, v in yaml.safe_load(open(sys.argv[1]))['config'].items()}\n"
        "raw['gpuOperator']['driverResources'] = {'limits': {'memory': '512Mi'}}\n"
        "try:\n    validate_stack(raw)\nexcept ConfigError as error:\n    print('\\n'.join(error.messages))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(PROD)], cwd=ROOT_DIR, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (
        "gpu-pool:gpuOperator.driverResources.limits.memory: the driver container's memory limit 512Mi" in done.stdout
    )


def test_a_valid_stack_file_passes_every_entry_point(tmp_path: Path) -> None:
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / PROD.name).write_bytes(PROD.read_bytes())
    assert preview_refusal(folder, tmp_path / "preview") == (0, [])
    for command in DAY2:
        code, err = day2_refusal(command, folder)
        assert "is not valid" not in err and code != 2, (command, err)
