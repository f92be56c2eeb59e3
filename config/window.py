"""`repair.unattended.breakerWindow`: whole hours or days, as a person reads a breaker ("2 failures in 24h").

On the standard library alone: the unattended repair's guard rails (day2/repair/unattended.py) read the window in
the cluster's watcher, where the pydantic-bound config is not installed."""

from __future__ import annotations

import re

WINDOW = re.compile(r"^(?P<count>[1-9][0-9]*)(?P<unit>[hd])$")


def window_hours(text: str) -> int:
    match = WINDOW.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a window of whole hours or days")
    return int(match["count"]) * (24 if match["unit"] == "d" else 1)
