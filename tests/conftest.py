"""Shared fixtures: where the upstream reference data lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
