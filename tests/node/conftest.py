"""node/'s waits poll at once and say every line in these tests (their pace is the environment's, as in a step)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fast_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_POOL_POLL_SECONDS", "0")
    monkeypatch.setenv("GPU_POOL_PROGRESS_SECONDS", "0")
