"""The Python SDKs the program is locked to are the provider plugins the engine tier runs (docs/engine.md: an SDK
sending its inputs to another version of its provider is a combination nobody tested)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ROOT / "e2e" / "engine" / "versions.env"


def engine_versions() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in VERSIONS.read_text().splitlines() if re.match(r"^[A-Z_]+=", line))
    return {key: value.strip() for key, value in pairs}


def locked(package: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return next(str(p["version"]) for p in lock["package"] if p["name"] == package)


def test_each_provider_sdk_is_locked_at_the_plugin_version_the_engine_tier_runs() -> None:
    versions = engine_versions()
    assert {
        "pulumi-kubernetes": locked("pulumi-kubernetes"),
        "pulumi-command": locked("pulumi-command"),
        "pulumi-proxmoxve": locked("pulumi-proxmoxve"),
    } == {
        "pulumi-kubernetes": versions["KUBERNETES_VERSION"],
        "pulumi-command": versions["COMMAND_VERSION"],
        "pulumi-proxmoxve": versions["PROXMOXVE_VERSION"],
    }


def test_the_python_sdk_is_not_newer_than_the_cli_the_engine_tier_runs() -> None:
    sdk = tuple(int(part) for part in locked("pulumi").split("."))
    cli = tuple(int(part) for part in engine_versions()["PULUMI_VERSION"].lstrip("v").split("."))
    assert sdk <= cli
