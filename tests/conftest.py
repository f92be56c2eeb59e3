"""Shared fixtures: where the upstream reference data lives."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from offline.recording import Recording, RecordingMonitor
from offline.runner import install_mocks, read_stack_file, run_main, set_config, to_engine_config
from tests.proxmox_hardware import answering

UPSTREAM_ENV = "GPU_POOL_UPSTREAM_DIR"


@pytest.fixture(scope="session")
def upstream() -> Path:
    """`../shared/upstream`, from the environment. CI sets it; elsewhere the contract tests skip."""
    value = os.environ.get(UPSTREAM_ENV)
    if not value:
        if os.environ.get("CI"):
            pytest.fail(f"{UPSTREAM_ENV} is not set: CI must run the contract tests against upstream data")
        pytest.skip(f"{UPSTREAM_ENV} is not set: contract tests against upstream data skipped")
    path = Path(value)
    if not (path / "gpu-operator").is_dir():
        pytest.fail(f"{UPSTREAM_ENV}={value} does not hold the upstream reference data")
    return path


@pytest.fixture
def pci_tables() -> dict[str, list[dict[str, Any]]]:
    """Per Proxmox node, what `getPci` answers; empty means a good MS-01 with its A1000 everywhere."""
    return {}


@pytest.fixture
def monitor(pci_tables: dict[str, list[dict[str, Any]]]) -> RecordingMonitor:
    """Fresh Pulumi mocks for each test (`pulumi.runtime.set_mocks` with a recording monitor)."""
    return install_mocks("test", preview=True, invoke=answering(pci_tables))


@pytest.fixture
def prod_config() -> dict[str, Any]:
    """The prod stack's config, a fresh deep copy each test may change."""
    return copy.deepcopy(read_stack_file("prod"))


@pytest.fixture
def run_stack_program(monitor: RecordingMonitor, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Recording]:
    """Run the real __main__.py against a config under this test's mocks; returns what it registered.

    As `pulumi preview` on an operator's machine: not offline, with an ssh-agent (tests about the agent unset it).
    """
    monkeypatch.delenv("GPU_POOL_OFFLINE", raising=False)
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.socket")

    def run(config: Mapping[str, Any], secrets: Mapping[str, str] | None = None) -> Recording:
        engine, secret_keys = to_engine_config(config, secrets or {})
        set_config(engine, secret_keys)
        run_main()
        return monitor.recording

    return run
