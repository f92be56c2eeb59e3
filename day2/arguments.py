"""The arguments more than one subcommand takes: where the objects come from and what the pool should look like
(claims, doctor), and the value types of times and durations."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from config.prometheus_access import PrometheusAccess, PrometheusAccessError, access_from
from config.secrets import PROMETHEUS_PASSWORD_ENV, PROMETHEUS_TOKEN_ENV
from day2.errors import Day2Error
from day2.objects import Snapshot
from day2.pool import PoolFacts, load_stack
from day2.sources import DUMP_COMMAND, load_dump, load_live

_DURATION = re.compile(r"^(?P<number>\d+)(?P<unit>[smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """`7d`, `36h`, `90m`, `3600s` or `3600` -> seconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration such as 7d, 36h, 90m or 3600s")
    return int(match["number"]) * _UNIT_SECONDS[match["unit"]]


def timestamp(text: str) -> datetime:
    """An RFC 3339 time with its zone: `2026-05-04T10:00:00Z`."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not an RFC 3339 time with a zone, e.g. 2026-05-04T10:00:00Z")
    return parsed


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds above zero")
    return value


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """claims' and doctor's: a dump or a live cluster, the stack to check it against, the output and the time."""
    source = parser.add_argument_group("where the objects come from")
    source.add_argument(
        "--from", dest="dump", metavar="FILE", help=f"read a dump written by `{DUMP_COMMAND}` (- for stdin)"
    )
    source.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of a live cluster (default: kubectl's)")
    source.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    stack = parser.add_argument_group("what the pool should look like")
    stack.add_argument("--stack", metavar="NAME", help="read Pulumi.NAME.yaml: nodes, profiles, labels, namespaces")
    stack.add_argument("--stack-dir", metavar="DIR", default=".", help="folder holding Pulumi.NAME.yaml (default: .)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")
    parser.add_argument(
        "--now", type=timestamp, metavar="TIME", help="judge ages as of this RFC 3339 time (default: now)"
    )


def add_prometheus_login_arguments(parser: argparse.ArgumentParser) -> None:
    """How to log in to a Prometheus that asks for it (config/prometheus_access.py): basic auth or a bearer token,
    each from a flag, a file or the environment. The flags that carry a value are config/secrets.py's SECRET_FLAGS
    (masked in every error, hidden from make's echo); the environment and the files keep it off the command line."""
    login = parser.add_argument_group("a Prometheus that asks for a login (docs/secrets.md)")
    login.add_argument("--prometheus-user", metavar="NAME", help="basic auth's user")
    login.add_argument(
        "--prometheus-password", metavar="PASSWORD", help=f"basic auth's password (better: {PROMETHEUS_PASSWORD_ENV})"
    )
    login.add_argument("--prometheus-password-file", metavar="FILE", help="a file holding basic auth's password")
    login.add_argument(
        "--prometheus-token",
        metavar="TOKEN",
        help=f"a bearer token (better: {PROMETHEUS_TOKEN_ENV} in the environment)",
    )
    login.add_argument("--prometheus-token-file", metavar="FILE", help="a file holding a bearer token")


def prometheus_access(args: argparse.Namespace) -> PrometheusAccess:
    """Where --prometheus is and how to log in; a mistake is one Day2Error without the credential."""
    try:
        return access_from(
            args.prometheus,
            user=args.prometheus_user,
            password=args.prometheus_password,
            password_file=args.prometheus_password_file,
            token=args.prometheus_token,
            token_file=args.prometheus_token_file,
            environ=os.environ,
        )
    except PrometheusAccessError as error:
        raise Day2Error(str(error)) from None


def pool_facts(args: argparse.Namespace) -> PoolFacts:
    """What the cluster is checked against: the stack's, or the defaults without --stack."""
    return load_stack(args.stack, Path(args.stack_dir)) if args.stack else PoolFacts()


def sampler(args: argparse.Namespace, facts: PoolFacts, needs: tuple[str, ...]) -> Callable[[], Snapshot]:
    """Reads the objects once per call: the dump again, or the live cluster (the stack's kubeconfig by default)."""
    if args.dump is not None:
        if args.kubeconfig or args.context:
            raise Day2Error("--from reads a dump; --kubeconfig and --context are for a live cluster")
        return lambda: load_dump(args.dump, needs, args.command)
    kubeconfig = args.kubeconfig or facts.kubeconfig
    context = args.context or facts.context
    return lambda: load_live(kubeconfig, context)
