"""The test process's environment as one consistent copy, safe to take from any thread."""

from __future__ import annotations

import os


def process_environment() -> dict[str, str]:
    """`os.environ` copied while other threads run. Copying it (`{**os.environ}`, `dict(os.environ)`) lists the keys,
    then reads each one; pytest sets and pops PYTEST_CURRENT_TEST in the main thread at every phase of every test, so
    an e2e thread that starts a process (the operator launcher, a wave's step) while the main thread moves to the
    next phase read a key that was gone: KeyError('PYTEST_CURRENT_TEST') failed CI at stop 54. Listing the keys is
    one step under the GIL, so a copy that raced a removal is simply taken again."""
    while True:
        try:
            return {key: os.environ[key] for key in list(os.environ)}
        except KeyError:
            continue
