"""How many pytest-xdist workers `-n auto` starts (`make test`, `make e2e`): one more than the cores."""

from __future__ import annotations

import os

import pytest

from tests.conftest import pytest_xdist_auto_num_workers


def test_auto_starts_one_worker_more_than_the_cores(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    assert pytest_xdist_auto_num_workers(pytestconfig) == len(os.sched_getaffinity(0)) + 1


def test_an_explicit_worker_count_from_the_environment_is_left_to_xdist(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert pytest_xdist_auto_num_workers(pytestconfig) is None
