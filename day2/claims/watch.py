"""`claims --watch`: one line per sample with the free GPUs per node, until interrupted.

The article sampled the free count every ten seconds while stopping a notebook and saw the card come back
only once the Terminating pod was gone. The clock, the sampler and the pause are injected, so tests run
without sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from day2.claims.compute import Claims
from day2.render import watch_json, watch_line


def stamp(at: datetime) -> str:
    """UTC, to the second: `2026-05-04T10:00:00Z`."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def watch(
    sample: Callable[[datetime], Claims],
    interval: float,
    out: TextIO,
    *,
    as_json: bool,
    sleep: Callable[[float], None],
    clock: Callable[[], datetime],
) -> int:
    """Sample, print, pause, until Ctrl-C (KeyboardInterrupt), which ends it with exit 0."""
    render = watch_json if as_json else watch_line
    count = 0
    try:
        while True:
            count += 1
            now = clock()
            out.write(render(count, stamp(now), sample(now)) + "\n")
            out.flush()
            sleep(interval)
    except KeyboardInterrupt:
        return 0
