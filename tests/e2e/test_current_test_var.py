"""The e2e tier's threads copy the environment while pytest moves from one test to the next (tests/e2e/conftest.py,
`_keep_current_test_var`): pytest's phase updates, as this tier runs them, never make such a copy fail."""

from __future__ import annotations

import os
import sys
import threading
import urllib.request
from collections.abc import Callable

import _pytest.runner as pytest_runner
import pytest

from tests.e2e.conftest import CURRENT_TEST_ENV


def copies_failing_beside(update: Callable[[], None]) -> list[str]:
    """Copy the environment (as `{**os.environ}` and as urllib's proxy lookup) in a thread while `update` runs
    over and over in this one; what the copies raised."""
    errors: list[str] = []
    stopping = threading.Event()

    def copy() -> None:
        while not stopping.is_set():
            try:
                dict(os.environ)
                urllib.request.getproxies()
            except KeyError as error:
                errors.append(repr(error))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    try:
        for _ in range(5_000):
            update()
    finally:
        stopping.set()
        thread.join()
        sys.setswitchinterval(interval)
    return errors


def test_a_thread_copying_the_environment_never_fails_as_pytest_moves_from_test_to_test(
    request: pytest.FixtureRequest,
) -> None:
    before = os.environ[CURRENT_TEST_ENV]

    def phases() -> None:
        for when in ("setup", "call", "teardown", None):
            pytest_runner._update_current_test_var(request.node, when)

    try:
        assert copies_failing_beside(phases) == []
    finally:
        os.environ[CURRENT_TEST_ENV] = before


def test_the_variable_still_names_the_running_test_and_its_phase(request: pytest.FixtureRequest) -> None:
    assert os.environ[CURRENT_TEST_ENV] == f"{request.node.nodeid} (call)"
