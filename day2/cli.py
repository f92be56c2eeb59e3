"""`gpu-pool claims`, `doctor`, `node-check`, `discover` and `repair`: who holds which card, which floor of a GPU node
is broken (seen from the cluster, or from the node itself), which cards a Proxmox node has, and a faulted card's VM
power-cycled one domain at a time.

Every subcommand is a module in SUBCOMMANDS with the same `add_arguments(parser)` and `run(args, io) -> ExitStatus`
(day2/command.py); a new one is a module and a line here. Exit codes (ExitStatus): 0 the answer was obtained
(`repair`: it would repair, or did); 1 `doctor` or `node-check` found a broken floor, `discover` a card that cannot
be passed through (or none), `repair` nothing a power cycle fixes (or a step of it failed); 2 a usage, input or
connection error, or a repair's guard rail, reported as one line on stderr (never a traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from config.arguments import ArgumentParser
from config.project import PROJECT
from day2.claims import command as claims
from day2.command import ExitStatus, Io, Subcommand, guarded
from day2.discover import command as discover
from day2.doctor import command as doctor
from day2.errors import Day2Error
from day2.node_check import command as node_check
from day2.node_check.facts import NodeInputError
from day2.repair import command as repair

PROG = PROJECT
# In `gpu-pool --help`'s order.
SUBCOMMANDS: tuple[Subcommand, ...] = (claims, doctor, node_check, discover, repair)
INSTALL_HINT = "run `uv sync --group day2` (or use make claims / make doctor)"


class _Parser(ArgumentParser):
    """argparse, but a usage error is one line (exit 2) instead of the usage block, and never repeats a
    credential (config/arguments.py)."""

    error_type = Day2Error


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Day-2 view of the GPU pool: who holds which card, and what is broken.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for subcommand in SUBCOMMANDS:
        subcommand.add_arguments(commands.add_parser(subcommand.NAME, help=subcommand.HELP))
    return parser


def _utc_now() -> datetime:
    return datetime.now(UTC)


def main(
    argv: list[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], datetime] = _utc_now,
) -> int:
    """Run `gpu-pool`; returns the exit code. out/err/sleep/clock are injectable for tests."""
    io = Io(out or sys.stdout, err or sys.stderr, sleep, clock)

    def run() -> ExitStatus:
        args = build_parser().parse_args(argv)
        by_name = {subcommand.NAME: subcommand for subcommand in SUBCOMMANDS}
        return by_name[args.command].run(args, io)

    return guarded(PROG, run, io.err, user_errors=(Day2Error, NodeInputError), missing_package=INSTALL_HINT)


if __name__ == "__main__":
    sys.exit(main())
