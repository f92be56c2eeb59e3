"""A secret on the make line is never printed: make echoes each command it runs (into the terminal and CI logs),
so a recipe that passes ARGS runs without the echo when ARGS carries `--secret`; the preview says once that a
value typed on a command line stays in the shell's history, and never repeats a `--secret` it refuses."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from benchmarks.settings import ROOT, without_make_variables
from config.secrets import SECRET_FLAGS
from offline.preview import HISTORY_NOTE

SECRET = "K10-the-secret-value-itself"


def _recipe_commands(makefile: str) -> list[str]:
    """Each recipe command's first line (a command continues over lines ending in a backslash)."""
    commands: list[str] = []
    continued = False
    for line in makefile.splitlines():
        if line.startswith("\t") and not continued:
            commands.append(line[1:])
        elif line.startswith("\t") and commands:
            commands[-1] += " " + line.strip()
        continued = line.startswith("\t") and line.endswith("\\")
    return commands


def test_every_recipe_that_passes_args_drops_makes_echo_when_they_carry_a_secret() -> None:
    commands = _recipe_commands((ROOT / "Makefile").read_text(encoding="utf-8"))
    with_args = [c for c in commands if "$(ARGS)" in c]

    assert len(with_args) >= 10
    assert [c for c in with_args if not c.startswith("$(NO_ECHO_IF_SECRET)")] == []


def test_make_preview_with_a_secret_in_args_prints_neither_the_command_nor_the_value() -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not on PATH")
    # --help: the preview stops after its arguments are read; what is under test is what make prints.
    args = f"ARGS=--secret gpu-pool:rke2Token={SECRET} --help"
    done = subprocess.run(
        [make, "preview", "STACK=minimal", args],
        cwd=ROOT,
        env=without_make_variables(dict(os.environ)),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "make preview: the command is not shown: ARGS carries a credential" in done.stdout


def test_the_makefile_hides_every_flag_the_list_of_credentials_names() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    flags = re.search(r"^SECRET_FLAGS := (.*)$", makefile, re.MULTILINE)

    assert flags is not None
    assert tuple(flags[1].split()) == SECRET_FLAGS


# The first leak: make hid its own line, then argparse printed "unrecognized arguments: --secret <token>".
MAKE_LINES = {
    "make diff with --secret": [
        "diff",
        "STACK=minimal",
        "BEFORE=Pulumi.minimal.yaml",
        f"ARGS=--secret rke2Token={SECRET}",
    ],
    "make claims with --secret": ["claims", f"ARGS=--from - --secret rke2Token={SECRET}"],
    "make claims with a login in --prometheus": [
        "claims",
        f"ARGS=--from /dev/null --usage --prometheus http://admin:{SECRET}@127.0.0.1:1",
    ],
    "make claims with --prometheus-password": [
        "claims",
        f"ARGS=--from /dev/null --prometheus-password {SECRET} --no-such-flag",
    ],
}


@pytest.mark.parametrize("line", MAKE_LINES)
def test_a_credential_on_a_make_line_is_in_neither_makes_echo_nor_the_commands_error(line: str) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not on PATH")
    done = subprocess.run(
        [make, *MAKE_LINES[line]],
        cwd=ROOT,
        env=without_make_variables(dict(os.environ)),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode != 0 or "the command is not shown" in done.stdout
    assert SECRET not in done.stdout + done.stderr
    assert "the command is not shown: ARGS carries a credential" in done.stdout


def test_the_preview_says_once_that_a_command_line_secret_stays_in_the_history() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack", "no-such-stack", "--secret", f"rke2Token={SECRET}",
         "--secret", f"proxmoxApiToken={SECRET}"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip

    assert done.stderr.count(HISTORY_NOTE) == 1
    assert SECRET not in done.stdout + done.stderr


def test_a_secret_given_without_its_key_is_refused_without_repeating_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack", "minimal", "--secret", SECRET],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip

    assert done.returncode == 2
    assert re.search(r"--secret takes KEY=VALUE; .*\(value not shown\)", done.stderr)
    assert SECRET not in done.stderr
