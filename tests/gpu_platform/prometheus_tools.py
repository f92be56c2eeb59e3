"""Prometheus' own tools for the tests: `promtool` and `prometheus` from Debian's `prometheus` package.

Missing locally, the tests that need them are skipped with the way to get them; on CI (`CI` set) they fail,
because CI must run them.
"""

from __future__ import annotations

import os
import shutil

import pytest

INSTALL_HINT = "install Debian's prometheus package: apt-get install -y prometheus (it ships promtool too)"


def require(binary: str) -> str:
    """The path of `binary`; skips the test without it, or fails it on CI."""
    path = shutil.which(binary)
    if path:
        return path
    reason = f"{binary} is not on PATH: {INSTALL_HINT}"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the tests that use it")
    pytest.skip(reason)
