"""How many pytest-xdist workers `-n auto` starts: `make test` one more than the cores, `make e2e` one per core."""

from __future__ import annotations

import os

import pytest

from tests.conftest import pytest_xdist_auto_num_workers

CORES = len(os.sched_getaffinity(0))


def test_the_unit_tier_starts_one_worker_more_than_the_cores(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.delenv("GPU_POOL_E2E", raising=False)
    assert pytest_xdist_auto_num_workers(pytestconfig) == CORES + 1


def test_the_e2e_tier_starts_one_worker_per_core(pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setenv("GPU_POOL_E2E", "1")
    assert pytest_xdist_auto_num_workers(pytestconfig) == CORES


def test_an_explicit_worker_count_from_the_environment_is_left_to_xdist(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert pytest_xdist_auto_num_workers(pytestconfig) is None
