"""The real Pulumi engine for the e2e tier: the CLI, the Python language host and the three providers.

`make engine-tools` (e2e/build-engine.sh) builds them into `.tools/engine/bin`. A `PulumiStack` runs the CLI in
a temp project directory whose entries link to the program's (Pulumi.yaml, __main__.py, pyproject.toml, uv.lock,
its packages), so everything the CLI writes lands in the temp dir: the stack file (`stack init` writes the
passphrase salt into it), the state (a file backend), PULUMI_HOME, and the `.venv` that the language host's uv
toolchain syncs from uv.lock before it runs the program, as on a user's fresh clone (from uv's cache: offline).
A test never touches the repo's stack files, its `.venv` or `~/.pulumi`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from offline.runner import PROJECT, ROOT_DIR
from tests.environ import process_environment

# The passphrase the temp stacks' secrets are encrypted with: a test value, never a user's.
PASSPHRASE = "gpu-pool e2e passphrase"
# What the program needs from the repo, linked into each temp project.
# pyproject.toml names README.md and the five packages: the editable install of the project needs all of them.
PROGRAM_ENTRIES = (
    "Pulumi.yaml",
    "__main__.py",
    "pyproject.toml",
    "uv.lock",
    "README.md",
    "components",
    "config",
    "knowledge",
    "node",
    "offline",
    "day2",
)
# A generous bound on one CLI command; an `up` of the whole stack against loopback servers takes about a minute.
COMMAND_SECONDS = 900

BINARIES = (
    "pulumi",
    "pulumi-language-python",
    "pulumi-language-python-exec",
    "pulumi-resource-kubernetes",
    "pulumi-resource-command",
    "pulumi-resource-proxmoxve",
)


@dataclass(frozen=True)
class Engine:
    """The pinned binaries `make engine-tools` builds."""

    bin_dir: Path

    def missing(self) -> list[str]:
        return [name for name in BINARIES if not (self.bin_dir / name).is_file()]

    def version(self, name: str) -> str:
        """The version a binary was built at, from its build stamp."""
        stamp = (self.bin_dir / ".stamps" / name).read_text().splitlines()
        return next(line.split("=", 1)[1] for line in stamp if line.startswith("version="))


def uv_cache_dir() -> str:
    """Where uv keeps its cache for this process (UV_CACHE_DIR, else XDG_CACHE_HOME/uv, else ~/.cache/uv)."""
    if os.environ.get("UV_CACHE_DIR"):
        return os.environ["UV_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "uv")


class PulumiError(AssertionError):
    """A CLI command failed where the test expected it to succeed: its output is the message."""


@dataclass
class PulumiStack:
    """One stack of this project under the real engine, with its state and stack file in `work`."""

    engine: Engine
    work: Path
    name: str
    # Directories put on PATH after the engine's: uv for the language host, kubectl for the program's steps.
    path: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def project_dir(self) -> Path:
        return self.work / "project"

    @property
    def stack_file(self) -> Path:
        return self.project_dir / f"Pulumi.{self.name}.yaml"

    @property
    def state_dir(self) -> Path:
        return self.work / "state"

    def environment(self) -> dict[str, str]:
        home = self.work / "pulumi-home"
        environ = {
            key: value
            for key, value in process_environment().items()
            # The caller's own Pulumi settings must not leak into a test stack.
            if not key.startswith(("PULUMI_", "GPU_POOL_SECRET_")) and key != "VIRTUAL_ENV"
        }
        environ.update(
            {
                "PATH": os.pathsep.join([str(self.engine.bin_dir), *map(str, self.path), environ.get("PATH", "")]),
                "PULUMI_HOME": str(home),
                "PULUMI_BACKEND_URL": f"file://{self.state_dir}",
                "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
                "PULUMI_SKIP_UPDATE_CHECK": "true",
                # Plugins come from PATH, never from a download (there is none to reach).
                "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
                "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
                # The language host's `uv sync` comes from uv's cache (filled by `make test`), never from PyPI.
                "UV_OFFLINE": "1",
                # uv's cache as this process sees it: a test that gives the CLI another HOME keeps it.
                "UV_CACHE_DIR": uv_cache_dir(),
                "UV_NO_DEFAULT_GROUPS": "1",
                "UV_PYTHON_DOWNLOADS": "never",
                "NO_COLOR": "1",
            }
        )
        environ.update(self.env)
        return environ

    def write_config(self, config: dict[str, Any]) -> None:
        """The stack file, as a user keeps it: plain keys; secrets go through `set_secret`."""
        self.stack_file.write_text(yaml.safe_dump({"config": config}, sort_keys=False))

    def run(
        self, *args: str, check: bool = True, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = ["pulumi", *args, "--stack", self.name, "--non-interactive"]
        done = subprocess.run(
            argv,
            cwd=self.project_dir,
            env=self.environment() | (env or {}),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        if check and done.returncode != 0:
            raise PulumiError(f"`{' '.join(args)}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def init(self, config: dict[str, Any]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.project_dir.mkdir(parents=True, exist_ok=True)
        for entry in PROGRAM_ENTRIES:
            (self.project_dir / entry).symlink_to(ROOT_DIR / entry)
        self.write_config(config)
        # `stack init` with a passphrase provider writes the encryption salt into the stack file.
        self.run("stack", "init", "--secrets-provider", "passphrase")

    def copy_to(self, work: Path) -> PulumiStack:
        """This stack as it is now, in `work`: its stack file (salt and secrets as the CLI wrote them) and its latest
        state, copied; the program's entries and the language host's `.venv` linked. A preview, a state edit or a
        config change there leaves this stack as it was (tests/e2e/test_engine_diff.py: each case changes its own
        copy of one settled `up`). The state's history and backups stay behind: the engine reads only the latest
        checkpoint."""
        twin = PulumiStack(self.engine, work, self.name, path=list(self.path), env=dict(self.env))
        twin.project_dir.mkdir(parents=True)
        for entry in PROGRAM_ENTRIES:  # the program this stack runs (a test may link it to another tree's)
            (twin.project_dir / entry).symlink_to((self.project_dir / entry).resolve())
        # The venv the language host synced for this stack: in sync with uv.lock already, so the copy's `uv sync`
        # finds nothing to do instead of installing the program's packages again.
        venv = self.project_dir / ".venv"
        if venv.is_dir():
            (twin.project_dir / ".venv").symlink_to(venv.resolve())
        shutil.copy2(self.stack_file, twin.stack_file)
        shutil.copytree(self.state_dir, twin.state_dir, ignore=shutil.ignore_patterns("history", "backups", "locks"))
        return twin

    def set_secret(self, key: str, value: str) -> None:
        # Through stdin, as a user pipes it: the value never appears in a process list.
        self.run("config", "set", "--secret", f"{PROJECT}:{key}", stdin=value)

    def preview_json(self, *extra: str, check: bool = True) -> dict[str, Any]:
        done = self.run("preview", "--json", "--diff", *extra, check=check)
        return parse_json_output(done.stdout)

    def up(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.run("up", "--yes", "--skip-preview", *extra)

    def export(self, *extra: str) -> dict[str, Any]:
        exported: dict[str, Any] = json.loads(self.run("stack", "export", *extra).stdout)
        return exported

    def state_text(self) -> str:
        """Every file the backend wrote, concatenated: what someone with the state bucket could read."""
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.state_dir.rglob("*")) if p.is_file())


def parse_json_output(stdout: str) -> dict[str, Any]:
    """`pulumi preview --json` prints one JSON document (diagnostics included) on stdout."""
    start = stdout.find("{")
    if start < 0:
        raise PulumiError(f"no JSON in the CLI's output:\n{stdout}")
    document: dict[str, Any] = json.loads(stdout[start:])
    return document


def step_ops(preview: dict[str, Any]) -> dict[str, str]:
    """Each resource's operation in a `preview --json`, by its name (the last URN segment).

    A replacement shows as several steps (create-replacement, replace, delete-replaced): it is reported once, as
    `replace`, the word `make diff` uses.
    """
    ops: dict[str, str] = {}
    for step in preview.get("steps", []):
        name = step["urn"].rsplit("::", 1)[-1]
        op = step["op"]
        if op in ("create-replacement", "delete-replaced", "replace"):
            op = "replace"
        if ops.get(name) == "replace":
            continue
        ops[name] = op
    return ops
