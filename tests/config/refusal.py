"""What every bad-config test checks: the program stops with Pulumi's clean RunError and registers nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from offline.recording import Recording

Run = Callable[..., Recording]
FD = "gpu-pool:failureDomains"


def refused(run: Run, config: dict[str, Any], monitor: Any, secrets: dict[str, str] | None = None) -> str:
    """Run the program, expect the clean RunError, and check nothing at all was registered."""
    with pytest.raises(pulumi.RunError) as raised:
        run(config, secrets)
    assert monitor.recording.registrations == [], "a refused config must register nothing"
    return str(raised.value)
