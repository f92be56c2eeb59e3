"""Every command the README shows in a fenced block works as written on a fresh clone, or needs a lab (said below).

The clone is a copy of the tracked files, as `git clone` makes them, with this checkout's uv put where `make` puts
it (the bootstrap itself, a pip download, is timed cold by `make bench`); packages come from uv's cache, never the
network. Commands run as a user types them, with `<placeholder>`s filled from the repository's own examples.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.settings import without_make_variables
from tests.conftest import upstream_dir

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# A fence may be indented (a block inside a numbered step).
FENCE = re.compile(r"^[ \t]*```(sh|console|bash|shell)\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)

# Commands that need what a fresh clone on this machine does not have, and where they are proven instead.
NEEDS_A_LAB = {
    "make test": "the suite itself: .ci/run runs it on a clean clone (it cannot run inside itself)",
    "make upstream": "the public internet (NVIDIA's Helm repository, GitHub, the Go proxy): "
    "tests/e2e/test_upstream_fetch.py runs it against loopback servers of the same kinds",
    "ssh root@<node> ": "a Proxmox node",
    "pulumi config set ": "a Pulumi stack of yours (step 4) and your secrets",
}
# <placeholder> -> what the test types for it: the repository's own example of the same thing.
PLACEHOLDERS = {
    "<node>-pci.json": "examples/discover/pve-dc1-hardware-pci.json",
    "<node>": "pve-dc1",
    "<mirror>": "the upstream data the tests read (tests/conftest.py), as the mirror",
}


@dataclass(frozen=True)
class Command:
    line: str
    # For a console block: what it prints, as the README shows it.
    shown: str | None = None


def commands(text: str) -> Iterator[Command]:
    for language, body in FENCE.findall(text):
        if language == "console":
            for chunk in re.split(r"^\$ ", body, flags=re.MULTILINE)[1:]:
                line, _, shown = chunk.partition("\n")
                yield Command(line.strip(), shown)
            continue
        for raw in body.replace("\\\n", " ").splitlines():
            line = raw.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                yield Command(line)


def lab_reason(line: str) -> str | None:
    """Why a command cannot run here: a key ending in a space is a prefix, any other the whole command."""
    return next(
        (why for key, why in NEEDS_A_LAB.items() if line == key or (key.endswith(" ") and line.startswith(key))), None
    )


README_COMMANDS = list(commands(README.read_text(encoding="utf-8")))
RUNNABLE = [c for c in README_COMMANDS if lab_reason(c.line) is None]


def test_the_readme_shows_commands_and_runs_most_of_them() -> None:
    assert any(c.line == "make preview" for c in RUNNABLE)
    assert any(c.line.startswith(".venv/bin/gpu-pool ") for c in RUNNABLE)


def test_no_command_calls_a_tool_the_clone_does_not_put_on_path() -> None:
    # uv lives in .tools/bin (the Makefile's bootstrap), never on PATH: `uv run ...` fails with 127 there.
    bare = [c.line for c in README_COMMANDS if re.match(r"^(uv|uvx|python|pytest|ruff|mypy)\b", c.line)]

    assert bare == []


def test_no_page_of_the_repository_shows_a_tool_the_clone_does_not_put_on_path() -> None:
    # The same trap in every page a user copies from (examples/discover/README.md said `uv run gpu-pool ...`).
    pages = [README, *sorted(ROOT.glob("docs/**/*.md")), *sorted(ROOT.glob("examples/**/*.md"))]
    bare = [
        f"{page.relative_to(ROOT)}: {c.line}"
        for page in pages
        for c in commands(page.read_text(encoding="utf-8"))
        if re.match(r"^(uv|uvx|python|pytest|ruff|mypy|gpu-pool)\b", c.line)
    ]

    assert bare == []


def test_every_command_said_to_need_a_lab_is_still_in_the_readme() -> None:
    shown = [c.line for c in README_COMMANDS]
    stale = [
        key for key in NEEDS_A_LAB if not any(c == key or (key.endswith(" ") and c.startswith(key)) for c in shown)
    ]

    assert stale == []


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    clone = tmp_path_factory.mktemp("clone") / "gpu-pool"
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (t.decode() for t in tracked)):
        source = ROOT / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    uv = ROOT / ".tools" / "bin" / "uv"
    (clone / ".tools" / "bin").mkdir(parents=True)
    (clone / ".tools" / "bin" / "uv").symlink_to(uv.resolve())
    # What `make test` leaves: the locked runtime, day-2 and dev packages (the README's commands come after it);
    # and the README's step 2, your stack file from an example.
    run_in(clone, "make .venv/.synced-dev", check=True)
    run_in(clone, "cp Pulumi.minimal.yaml Pulumi.mylab.yaml", check=True)
    return clone


def run_in(clone: Path, line: str, *, check: bool = False) -> subprocess.CompletedProcess[str]:
    # Not the variables of an outer `make test ARGS=...`, which a user's own `make preview` never sees.
    env = {
        k: v
        for k, v in without_make_variables(dict(os.environ)).items()
        if not k.startswith(("VIRTUAL_ENV", "GPU_POOL_SECRET"))
    }
    env.update({"UV_OFFLINE": "1", "MAKEFLAGS": ""})
    done = subprocess.run(
        ["/bin/sh", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if check:
        assert done.returncode == 0, f"{line} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def typed(line: str, mirror: Path | None) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        line = line.replace(placeholder, str(mirror) if placeholder == "<mirror>" else value)
    return line


@pytest.mark.parametrize("command", RUNNABLE, ids=[c.line for c in RUNNABLE])
def test_the_readme_command_works_as_written_on_a_fresh_clone(command: Command, fresh_clone: Path) -> None:
    mirror, said = upstream_dir()
    if "<mirror>" in command.line and mirror is None:
        pytest.skip(said)
    line = typed(command.line, mirror)

    done = run_in(fresh_clone, line)

    # `gpu-pool doctor` exits 1 at a broken floor, as the README says of the example it shows.
    expected = 1 if line.startswith(".venv/bin/gpu-pool doctor ") else 0
    assert done.returncode == expected, f"{line} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    if command.shown is not None:
        assert done.stdout == command.shown, f"{line} printed what the README does not show:\n{done.stdout}"
    assert shlex.split(line)
