"""Reading an earlier stack file for `make diff`: the rules that guard the next `pulumi up` are waived.

An earlier stack file describes what is deployed, not what will be. Rules added since it was written (the RKE2
containerd floor, toolkit keys that never worked on RKE2, secrets in plain text, a kernel pin without a key)
would otherwise make `make diff` refuse the very file a user is moving away from. While one is read, such a
rule records its message here instead of refusing; `make diff` shows them. Rules about the file's shape are
never waived: a plan cannot be built from a value of the wrong type.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_waived: list[str] | None = None


@contextmanager
def reading_earlier_file() -> Iterator[list[str]]:
    """While it lasts, waivable refusals are collected in the list it yields."""
    global _waived
    _waived = []
    try:
        yield _waived
    finally:
        _waived = None


def waived(message: str) -> bool:
    """True, and the message kept, when an earlier stack file is being read; else False (refuse as usual)."""
    if _waived is None:
        return False
    if message not in _waived:
        _waived.append(message)
    return True
