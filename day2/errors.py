"""The one error the tool reports to its user: a usage, input or connection problem, as one line (exit 2)."""

from __future__ import annotations


class Day2Error(Exception):
    """Something the user can fix before an answer is possible: a bad flag, dump, stack or an unreachable API.

    The message is one line that names what failed; the command prints it without a traceback and exits 2.
    """
