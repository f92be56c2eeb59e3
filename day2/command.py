"""What every `gpu-pool` subcommand is: the same two functions, given the same things, returning an ExitStatus
(httpie's `CLI_TASKS` and `ExitStatus`). Standard library only: node-check runs on the node from a zip, with the
same exit codes and the same one-line errors as the rest of the tool.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import Protocol, TextIO

from config.plain_credentials import without_userinfo

DEBUG_ENV = "GPU_POOL_DEBUG"


class ExitStatus(IntEnum):
    """The exit codes, a contract with the scripts and alerts that run the tool: never renumber one."""

    # The answer was obtained (`repair`: it would repair, or did; `doctor`, `node-check`: every floor stands).
    SUCCESS = 0
    # The answer is a finding: a broken floor, a card that cannot be passed through (or none), nothing a power cycle
    # fixes, or a repair step that failed.
    FINDING = 1
    # A usage, input or connection error, or a repair's guard rail: one line on stderr, never a traceback.
    ERROR = 2
    # Interrupted (Ctrl-C), as a shell reports a SIGINT.
    INTERRUPTED = 130


@dataclass(frozen=True)
class Io:
    """Where a subcommand writes and how it waits and reads the time: injectable, so tests run without a clock."""

    out: TextIO
    err: TextIO
    sleep: Callable[[float], None]
    clock: Callable[[], datetime]


class Subcommand(Protocol):
    """A module of day2/ that is one subcommand: `gpu-pool <NAME>` adds its arguments, then runs it."""

    NAME: str
    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, io: Io) -> ExitStatus: ...


def one_line(error: BaseException) -> str:
    """The error on one line, without any URL's login (a message that quotes a URL never repeats its password)."""
    return without_userinfo(" ".join(str(error).split()))


def guarded(
    prog: str,
    call: Callable[[], ExitStatus],
    err: TextIO,
    *,
    user_errors: tuple[type[BaseException], ...],
    missing_package: str | None = None,
) -> int:
    """The one error wrapper: a mistake of the user's (one of user_errors) is one line on stderr and ERROR; Ctrl-C is
    INTERRUPTED; `--help` exits 0. With `missing_package` (how to install the tool's packages), a package that is not
    installed is said so, and anything else unexpected is one line too (GPU_POOL_DEBUG=1 raises it instead); without
    it (node-check on the node) an unexpected error keeps its traceback."""
    try:
        return call()
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else ExitStatus.SUCCESS
    except user_errors as error:
        err.write(f"{prog}: {one_line(error)}\n")
        return ExitStatus.ERROR
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except ModuleNotFoundError as error:
        if missing_package is None:
            raise
        err.write(f"{prog}: the day-2 tool's package {error.name} is not installed: {missing_package}\n")
        return ExitStatus.ERROR
    except Exception as error:  # a bug, or a dump shaped like nothing Kubernetes writes
        if missing_package is None or os.environ.get(DEBUG_ENV):
            raise
        err.write(f"{prog}: unexpected error: {type(error).__name__}: {one_line(error)[:300]}")
        err.write(f" (set {DEBUG_ENV}=1 for the traceback)\n")
        return ExitStatus.ERROR
