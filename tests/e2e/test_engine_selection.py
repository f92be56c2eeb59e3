"""`make e2e` runs a user's own Pulumi engine when it is installed at the pinned versions (`pulumi version`, `pulumi
plugin ls`), and says what is missing when it is not. The "user's install" here is the engine the tier built, laid
out as Pulumi's installer and `pulumi plugin install` lay it out: the CLI with its language host in one folder,
the plugins in PULUMI_HOME/plugins; the installed engine then previews prod as the source-built one does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from offline.runner import ROOT_DIR
from tests.e2e.engine import Engine
from tests.e2e.engine_stacks import new_stack

VERSIONS = dict(
    line.split("=", 1)
    for line in (ROOT_DIR / "e2e" / "engine" / "versions.env").read_text().splitlines()
    if line and not line.startswith("#")
)
PLUGINS = {
    "kubernetes": VERSIONS["KUBERNETES_VERSION"],
    "command": VERSIONS["COMMAND_VERSION"],
    "proxmoxve": VERSIONS["PROXMOXVE_VERSION"],
}


def _select(tools: Path, cli_dir: Path | None, home: Path, mode: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(([str(cli_dir)] if cli_dir else []) + ["/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": str(home), "PULUMI_HOME": str(home / ".pulumi"), "ENGINE": mode}
    env["PULUMI_BUILD_DIR"] = str(home / "no-sources")
    script = ROOT_DIR / "e2e" / "select-engine.sh"
    return subprocess.run(["bash", str(script), str(tools)], env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def installed(engine: Engine, tmp_path: Path) -> tuple[Path, Path]:
    """The CLI and language host in one folder; the plugins installed into PULUMI_HOME with `pulumi plugin install`."""
    cli = tmp_path / "pulumi-cli"
    cli.mkdir()
    for name in ("pulumi", "pulumi-language-python", "pulumi-language-python-exec"):
        shutil.copy2(engine.bin_dir / name, cli / name)
    home = tmp_path / "home"
    for name, version in PLUGINS.items():
        binary = str(engine.bin_dir / f"pulumi-resource-{name}")
        subprocess.run(
            [str(cli / "pulumi"), "plugin", "install", "resource", name, version, "--file", binary],
            env={
                "PATH": f"{cli}:/usr/bin:/bin",
                "PULUMI_HOME": str(home / ".pulumi"),
                "HOME": str(home),
                "PULUMI_SKIP_UPDATE_CHECK": "true",
            },
            check=True,
            capture_output=True,
        )
    return cli, home


def test_with_nothing_installed_and_no_sources_the_error_names_what_is_missing(tmp_path: Path) -> None:
    done = _select(tmp_path / "tools", None, tmp_path, "auto")

    assert done.returncode == 1
    assert f"the Pulumi CLI {VERSIONS['PULUMI_VERSION']} is not on PATH" in done.stderr
    assert "no pulumi-build sources at" in done.stderr


def test_a_plugin_at_another_version_is_named_with_the_command_that_installs_the_pinned_one(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    cli, home = installed
    shutil.rmtree(home / ".pulumi" / "plugins" / f"resource-kubernetes-v{PLUGINS['kubernetes']}")

    done = _select(tmp_path / "tools", cli, home, "installed")

    assert done.returncode == 1
    kubernetes = PLUGINS["kubernetes"]
    assert (
        f"has no resource plugin kubernetes {kubernetes} (pulumi plugin install resource kubernetes {kubernetes})"
        in (done.stderr)
    )


def test_the_installed_engine_is_used_and_previews_prod_as_the_built_one_does(
    installed: tuple[Path, Path],
    tmp_path: Path,
    engine_path: list[Path],
    prod_engine_config: dict[str, object],
    crds: list[str],
) -> None:
    cli, home = installed

    done = _select(tmp_path / "tools", cli, home, "auto")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"using your Pulumi engine: {VERSIONS['PULUMI_VERSION']} at {cli / 'pulumi'}")
    selected = Path((tmp_path / "tools" / "selected").read_text().strip())
    assert {p.name: p.resolve().parent for p in selected.iterdir() if p.is_symlink()} == {
        "pulumi": cli,
        "pulumi-language-python": cli,
        "pulumi-language-python-exec": cli,
        **{f"pulumi-resource-{n}": home / ".pulumi" / "plugins" / f"resource-{n}-v{v}" for n, v in PLUGINS.items()},
    }
    stack = new_stack(
        Engine(selected), tmp_path / "work", "prod", prod_engine_config, engine_path, {"GPU_POOL_OFFLINE": "1"}
    )
    previewed = stack.preview_json()
    assert [d for d in previewed.get("diagnostics", []) if d.get("severity") == "error"] == []
    assert len(previewed["steps"]) >= 60
