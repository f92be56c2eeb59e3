"""The environment copy the e2e tier's threads take while pytest's main thread sets and pops its own variable."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from tests.environ import process_environment

CHURN = "GPU_POOL_TEST_ENVIRON_CHURN"


@pytest.fixture
def churning_environment() -> Iterator[Callable[[Callable[[], object]], int]]:
    """A thread that sets and pops one variable as fast as it can, as pytest does with PYTEST_CURRENT_TEST; what it
    yields copies the environment many times beside it and counts the copies that raised."""
    stopping = threading.Event()

    def churn() -> None:
        while not stopping.is_set():
            os.environ[CHURN] = "1"
            os.environ.pop(CHURN, None)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=churn, daemon=True)
    thread.start()

    def failures(copy: Callable[[], object]) -> int:
        failed = 0
        for _ in range(20_000):
            try:
                copy()
            except KeyError:
                failed += 1
        return failed

    try:
        yield failures
    finally:
        stopping.set()
        thread.join()
        sys.setswitchinterval(interval)
        os.environ.pop(CHURN, None)


def test_copying_the_environment_while_another_thread_pops_a_variable_never_raises(
    churning_environment: Callable[[Callable[[], object]], int],
) -> None:
    assert churning_environment(process_environment) == 0


def test_the_plain_copy_it_replaces_does_raise_under_the_same_churn(
    churning_environment: Callable[[Callable[[], object]], int],
) -> None:
    """The adversity is real: the copy the e2e tier took before (CI's KeyError('PYTEST_CURRENT_TEST')) fails here."""
    assert churning_environment(lambda: {**os.environ}) > 0
