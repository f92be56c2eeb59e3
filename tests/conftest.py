"""Shared fixtures: where the upstream reference data lives."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate.utils
import pytest

from benchmarks.settings import without_make_variables
from offline.recording import Recording, RecordingMonitor
from offline.runner import install_mocks, read_stack_file, run_main, set_config, to_engine_config
from refdata import fetch as refdata_fetch
from tests.proxmox_hardware import answering

# kubernetes_validate opens and parses the kind's schema and the whole _definitions.json (1.4 MB) again for every
# object it validates: a third of the fixture tests' time. The files are the package's own and never change.
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents)

UPSTREAM_ENV = "GPU_POOL_UPSTREAM_DIR"
# Every skip for missing upstream data says this, so the session's summary can count them (pytest_terminal_summary).
NO_UPSTREAM = "no upstream reference data"
FETCH_HINT = "make upstream (or make upstream UPSTREAM_FROM=<mirror> without network)"


def pytest_configure(config: pytest.Config) -> None:
    """Every process a test starts runs without the variables of the make that started the tests (`make test`,
    `make e2e`): a test's own `make diff` under `make e2e ARGS=--durations=40` read that ARGS and failed with
    "unrecognized arguments". Before pytest-xdist starts its workers, so they inherit the same."""
    for name in set(os.environ) - set(without_make_variables(dict(os.environ))):
        del os.environ[name]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (`make test`): one worker more than the usable cores. Many tests wait on a subprocess (the offline
    preview, promtool, the node steps, loopback servers) for part of their time; on 2 cores, 3 workers ran the suite
    in 43-47 s against 51.6 s for 2 and 48 s for 4 (2026-12-05); once the loopback servers stopped at once
    (tests/loopback.py), 3 and 2 measured the same (42.5 s, interleaved). PYTEST_XDIST_AUTO_NUM_WORKERS still wins.
    `make e2e` the same: on 2 cores the whole tier took 885 s with 3 workers and 1067 s with 2, on a quiet machine
    (docs/engine.md; while its pollers kept both cores busy, 3 workers had been the slower, 2166 s against 1993)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    return len(os.sched_getaffinity(0)) + 1


def upstream_dir() -> tuple[Path | None, str]:
    """Where the upstream reference data is: GPU_POOL_UPSTREAM_DIR, else the folder `make upstream` fills."""
    value = os.environ.get(UPSTREAM_ENV)
    if value:
        return Path(value), f"{UPSTREAM_ENV}={value}"
    folder = refdata_fetch.DEFAULT_DEST
    if refdata_fetch.is_complete(folder):
        return folder, str(folder)
    if folder.is_dir():
        return (
            None,
            f"{NO_UPSTREAM}: {folder} was fetched against other digests than refdata/digests.json: {FETCH_HINT}",
        )
    return None, f"{NO_UPSTREAM}: run {FETCH_HINT}"


@pytest.fixture(scope="session")
def upstream() -> Path:
    """The upstream reference data (refdata/sources.py): CI must have it; elsewhere its tests skip, counted."""
    path, said = upstream_dir()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{said}: CI must run the contract tests against upstream data")
        pytest.skip(said)
    if not (path / "gpu-operator").is_dir():
        pytest.fail(f"{said} does not hold the upstream reference data: {FETCH_HINT}")
    return path


def missing_data_line(skipped: int) -> str:
    return (
        f"{skipped} contract tests skipped: {NO_UPSTREAM} here; `{FETCH_HINT.split(' (')[0]}` fetches it from its "
        "public sources, `make upstream UPSTREAM_FROM=<mirror>` from a mirror"
    )


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Count the tests the missing upstream data skipped (said last, by pytest_unconfigure)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_UPSTREAM in str(r.longrepr)]
    config.stash[_MISSING_DATA] = len(skipped)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Say it in the very last line, after pytest's own short summary and counts: a long list of skip reasons
    above would otherwise push it out of sight."""
    skipped = config.stash.get(_MISSING_DATA, 0)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if skipped and reporter is not None:
        reporter.write_line(missing_data_line(skipped), yellow=True, bold=True)


_MISSING_DATA = pytest.StashKey[int]()


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
