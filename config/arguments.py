"""The argument parser of every command line (`gpu-pool` and its subcommands, node-check, the offline preview,
`make diff`, `make chart`): argparse, except that nothing it prints repeats a credential (issue 50).

argparse quotes what it was given in its errors: `unrecognized arguments: --secret rke2Token=<the whole token>` when
a flag goes to a command that does not take it, `argument --prometheus: expected one argument` beside the rest of
the line, a URL's `user:password@` in any message about it. Every error here is built from argparse's message with
each value of a secret flag (config/secrets.py SECRET_FLAGS, also spelt `--flag=value` or abbreviated) replaced by
`<value not shown>`, and each URL's login by `***@`; a secret flag's value is never echoed, whatever the mistake.

Standard library only: node-check runs it on the node from a zip.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from typing import NoReturn

from config.plain_credentials import without_userinfo
from config.secrets import SECRET_FLAGS

NOT_SHOWN = "<value not shown>"


def _is_secret_flag(option: str, own: Collection[str]) -> bool:
    # argparse accepts an unambiguous prefix (`--prometheus-pass`) for a long option; a parser's own option that is
    # no secret flag (`--prometheus`, a prefix of `--prometheus-password`) is itself.
    if option in own and option not in SECRET_FLAGS:
        return False
    return len(option) > 3 and any(flag.startswith(option) for flag in SECRET_FLAGS)


def secret_values(argv: Sequence[str], own: Collection[str] = ()) -> list[str]:
    """The values the secret flags of `argv` carry: `--flag VALUE` and `--flag=VALUE`, longest first (a value that
    contains another is masked whole). `own`: the parser's option strings."""
    values: list[str] = []
    for index, arg in enumerate(argv):
        option, equals, value = arg.partition("=")
        if equals and option.startswith("--") and _is_secret_flag(option, own):
            values.append(value)
        elif _is_secret_flag(arg, own) and index + 1 < len(argv):
            values.append(argv[index + 1])
    return sorted({value for value in values if value}, key=len, reverse=True)


def masked(text: str, argv: Sequence[str], own: Collection[str] = ()) -> str:
    """`text` without any secret flag's value from `argv` and without any URL's login."""
    for value in secret_values(argv, own):
        text = text.replace(value, NOT_SHOWN)
    return without_userinfo(text)


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose messages mask credentials. A subclass that sets `error_type` gets one line
    (`<message> (see <prog> --help)`) raised as that exception instead of the usage block and exit 2: the day-2
    tool's one-line errors (day2/command.py guarded)."""

    error_type: type[Exception] | None = None
    _argv: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A subcommand's parser is called with the rest of the line, which is all its own messages can quote.
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        text = masked(message, self._argv, self._option_string_actions)
        if self.error_type is not None:
            raise self.error_type(f"{text} (see {self.prog} --help)")
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {text}\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        super().exit(status, masked(message, self._argv, self._option_string_actions) if message else message)
