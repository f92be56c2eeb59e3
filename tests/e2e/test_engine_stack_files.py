"""A stack file is read the same way by the Pulumi CLI and by the offline preview: what one refuses, so does the other.

Each case edits a stack file that `pulumi stack init` and `pulumi config set --secret` wrote for real (salt and
ciphertexts included), then runs `pulumi preview` with the real engine and `python -m offline.preview` on the
same file. Both must refuse it, naming the same key, or both must accept it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from offline.runner import ROOT_DIR
from tests.e2e.engine import Engine, PulumiStack
from tests.e2e.engine_stacks import new_stack


@dataclass(frozen=True)
class Case:
    name: str
    edit: Callable[[str], str]
    # None: both accept the file. Otherwise both refuse it, and the offline preview's message names this.
    named: str | None
    # What the CLI's own message names, where it names anything ("bad value" names no key).
    cli_named: str | None = None


def replace_once(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert text.count(old) >= 1, f"{old!r} not in the stack file"
        return text.replace(old, new, 1)

    return edit


def in_config(lines: str) -> Callable[[str], str]:
    """Add lines at the top of the `config:` map (the file ends with `encryptionsalt:`, outside it)."""

    def edit(text: str) -> str:
        return text.replace("config:\n", "config:\n" + lines, 1)

    return edit


def secure_value(key: str, new: str) -> Callable[[str], str]:
    """Replace the `secure:` ciphertext `pulumi config set --secret` wrote for key."""

    def edit(text: str) -> str:
        pattern = re.compile(rf"(  gpu-pool:{key}:\n    secure: )\S+")
        assert pattern.search(text), f"no secure value for {key}"
        return pattern.sub(lambda m: m.group(1) + new, text, count=1)

    return edit


CASES = [
    Case("a YAML syntax error", in_config("  gpu-pool:broken: [unclosed\n"), "line", "line"),
    Case(
        "a key given twice",
        in_config("  gpu-pool:rke2:\n    version: v1.33.5+rke2r1\n"),
        "gpu-pool:rke2",
        "already defined",
    ),
    # The CLI gives an unprefixed key this project's namespace (loaders.go): both accept it.
    Case(
        "a project key without its namespace",
        replace_once("  gpu-pool:sharingProfiles:", "  sharingProfiles:"),
        None,
    ),
    Case(
        "a secret in plain text",
        lambda text: re.sub(r"  gpu-pool:rke2Token:\n    secure: \S+\n", "  gpu-pool:rke2Token: K10plain\n", text),
        "gpu-pool:rke2Token",
        "rke2Token",
    ),
    # The CLI's own message is "bad value", naming no key; the offline preview names it.
    Case("a ciphertext that is not one", secure_value("rke2Token", "v1:not-a-ciphertext"), "gpu-pool:rke2Token"),
    # YAML 1.1 would read this as a sexagesimal float; the CLI (YAML 1.2) and the offline reader keep the text.
    Case(
        "a PCI address as lspci prints it, unquoted",
        lambda text: re.sub(r"pciAddress: \S+", "pciAddress: 0000:01:00.0", text, count=1),
        None,
    ),
]


def offline_preview(stack: PulumiStack, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "offline.preview", "--stack", stack.name),
            *("--stack-dir", str(stack.project_dir), "--out", str(out), "--quiet"),
        ],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def stack_files(
    engine: Engine,
    engine_path: list[Path],
    prod_engine_config: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[PulumiStack, str]:
    # Preflights off as in `make preview`: the offline preview compared here never runs them either.
    work = tmp_path_factory.mktemp("stack-files")
    stack = new_stack(engine, work, "files", prod_engine_config, engine_path, {"GPU_POOL_OFFLINE": "1"})
    return stack, stack.stack_file.read_text()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_cli_and_the_offline_preview_refuse_the_same_stack_files(
    case: Case, stack_files: tuple[PulumiStack, str], tmp_path: Path
) -> None:
    stack, original = stack_files
    stack.stack_file.write_text(case.edit(original))
    try:
        cli = stack.run("preview", check=False)
        offline = offline_preview(stack, tmp_path)
    finally:
        stack.stack_file.write_text(original)
    cli_text, offline_text = cli.stdout + cli.stderr, offline.stdout + offline.stderr
    verdicts = {"pulumi preview": cli.returncode != 0, "offline preview": offline.returncode != 0}
    expected = case.named is not None
    assert verdicts == {"pulumi preview": expected, "offline preview": expected}, (cli_text, offline_text)
    if case.named is not None:
        assert case.named in offline_text, offline_text
    if case.cli_named is not None:
        assert case.cli_named in cli_text, cli_text
    assert "Traceback" not in offline_text
