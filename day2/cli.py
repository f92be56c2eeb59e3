"""`gpu-pool claims`, `doctor`, `discover` and `repair`: who holds which card, which floor of a GPU node is
broken, which cards a Proxmox node has, and a faulted card's VM power-cycled one domain at a time.

Exit codes: 0 the answer was obtained (`repair`: it would repair, or did); 1 `doctor` found a broken floor,
`discover` a card that cannot be passed through (or none), `repair` nothing a power cycle fixes (or a step of
it failed); 2 a usage, input or connection error, or a repair's guard rail, reported as one line on stderr
(never a traceback).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn, TextIO

from config.project import PROJECT
from day2 import discover_cli, repair_cli
from day2.claims import DEFAULT_LONG_HELD_SECONDS, Claims, ClaimsOptions, compute_claims
from day2.doctor import diagnose_all, require_known_node
from day2.errors import Day2Error
from day2.node_check import add_arguments as add_node_check_arguments
from day2.node_check import run as run_node_check
from day2.node_facts import NodeInputError
from day2.objects import Snapshot
from day2.pool import PoolFacts, load_stack
from day2.prometheus import idle_holders, peak_utilisation
from day2.sources import CLAIMS_NEEDS, DOCTOR_NEEDS, DUMP_COMMAND, load_dump, load_live

PROG = PROJECT
DEBUG_ENV = "GPU_POOL_DEBUG"
_DURATION = re.compile(r"^(?P<number>\d+)(?P<unit>[smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (exit 2) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        raise Day2Error(f"{message} (see {self.prog} --help)")


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


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    source = common.add_argument_group("where the objects come from")
    source.add_argument(
        "--from", dest="dump", metavar="FILE", help=f"read a dump written by `{DUMP_COMMAND}` (- for stdin)"
    )
    source.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of a live cluster (default: kubectl's)")
    source.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    stack = common.add_argument_group("what the pool should look like")
    stack.add_argument("--stack", metavar="NAME", help="read Pulumi.NAME.yaml: nodes, profiles, labels, namespaces")
    stack.add_argument("--stack-dir", metavar="DIR", default=".", help="folder holding Pulumi.NAME.yaml (default: .)")
    common.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")
    common.add_argument(
        "--now", type=timestamp, metavar="TIME", help="judge ages as of this RFC 3339 time (default: now)"
    )

    parser = _Parser(prog=PROG, description="Day-2 view of the GPU pool: who holds which card, and what is broken.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    claims = commands.add_parser("claims", parents=[common], help="GPUs per node, who holds them, who waits")
    claims.add_argument(
        "--long-held",
        type=duration_seconds,
        default=DEFAULT_LONG_HELD_SECONDS,
        metavar="DURATION",
        help="flag holders bound longer than this (default: 7d)",
    )
    claims.add_argument("--prometheus", metavar="URL", help="flag holders whose GPU stayed idle (dcgm-exporter data)")
    claims.add_argument("--watch", type=positive_seconds, metavar="SECONDS", help="print free GPUs every SECONDS")
    doctor = commands.add_parser("doctor", parents=[common], help="walk a GPU node's floors from the driver up")
    doctor.add_argument("node", nargs="?", metavar="NODE", help="node name (default: every GPU node)")
    doctor.add_argument(
        "--node-check",
        action="append",
        default=[],
        metavar="FILE",
        help="`gpu-pool node-check -o json` from a node: its floors stand below driver (repeatable, one per node)",
    )
    node_check = commands.add_parser(
        "node-check", help="on a GPU worker: its floors from the PCI bus up (pci, link, driver, nvml, health)"
    )
    add_node_check_arguments(node_check)
    discover_cli.add_parser(commands, _Parser)
    repair_cli.add_parser(commands, _Parser, timestamp)
    return parser


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Io:
    out: TextIO
    err: TextIO
    sleep: Callable[[float], None]
    clock: Callable[[], datetime]


def _sampler(args: argparse.Namespace, facts: PoolFacts) -> Callable[[], Snapshot]:
    if args.dump is not None:
        if args.kubeconfig or args.context:
            raise Day2Error("--from reads a dump; --kubeconfig and --context are for a live cluster")
        needs = CLAIMS_NEEDS if args.command == "claims" else DOCTOR_NEEDS
        return lambda: load_dump(args.dump, needs, args.command)
    kubeconfig = args.kubeconfig or facts.kubeconfig
    context = args.context or facts.context
    return lambda: load_live(kubeconfig, context)


def _claims_options(args: argparse.Namespace, facts: PoolFacts, now: datetime) -> ClaimsOptions:
    marking = facts.marking
    return ClaimsOptions(
        now=now,
        long_held_seconds=args.long_held,
        expected=facts.expected_slots(),
        gpu_node_label=(marking.label_key, marking.label_value),
    )


def _with_idle(snapshot: Snapshot, claims: Claims, options: ClaimsOptions, url: str, facts: PoolFacts) -> Claims:
    peaks = peak_utilisation(url, facts.idle_hours, options.now)
    held = {(h.namespace, h.pod): h.age_seconds for h in claims.holders}
    idle = idle_holders(peaks, held, facts.idle_hours, facts.idle_percent)
    return compute_claims(snapshot, replace(options, idle=idle))


def _run_claims(args: argparse.Namespace, facts: PoolFacts, ctx: _Io) -> int:
    sample = _sampler(args, facts)
    if args.watch is not None:
        from day2.watch import watch  # prints with day2.render, which needs rich

        if args.prometheus:
            raise Day2Error("--watch prints free GPUs only; drop --prometheus")
        fixed = args.now

        def one(now: datetime) -> Claims:
            return compute_claims(sample(), _claims_options(args, facts, fixed or now))

        return watch(one, args.watch, ctx.out, as_json=args.output == "json", sleep=ctx.sleep, clock=ctx.clock)
    snapshot = sample()
    options = _claims_options(args, facts, args.now or ctx.clock())
    claims = compute_claims(snapshot, options)
    if args.prometheus:
        claims = _with_idle(snapshot, claims, options, args.prometheus, facts)
    from day2 import render  # rich: imported once there is something to print

    if args.output == "json":
        render.write_json(render.claims_json(claims), ctx.out)
    else:
        shared = any(n.allocatable > 1 or (n.expected or 0) > 1 for n in claims.nodes)
        render.print_claims(claims, ctx.out, idle_checked=bool(args.prometheus), time_sliced=shared)
    return 0


def _run_doctor(args: argparse.Namespace, facts: PoolFacts, ctx: _Io) -> int:
    from day2 import render
    from day2.node_report import read_node_checks

    node_floors = read_node_checks(args.node_check)
    snapshot = _sampler(args, facts)()
    if args.node:
        require_known_node(snapshot, facts, args.node, "the dump" if args.dump is not None else "the cluster")
    diagnoses = diagnose_all(snapshot, facts, args.node, node_floors)
    if stray := sorted(set(node_floors) - {d.node for d in diagnoses}):
        checked = ", ".join(d.node for d in diagnoses) or "none"
        stray_nodes = ", ".join(stray)
        raise Day2Error(f"--node-check: a report of {stray_nodes}, which doctor does not check (it checks {checked})")
    if not diagnoses:
        label = f"{facts.marking.label_key}={facts.marking.label_value}"
        ctx.err.write(f"{PROG}: no GPU node found: no node carries {label}; name a NODE or pass --stack\n")
        if args.output == "json":
            render.write_json([], ctx.out)
        return 1
    if args.output == "json":
        documents = [render.diagnosis_json(d) for d in diagnoses]
        render.write_json(documents[0] if args.node else documents, ctx.out)
    else:
        render.print_diagnoses(diagnoses, ctx.out)
    return 0 if all(d.healthy for d in diagnoses) else 1


def main(
    argv: list[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], datetime] = _utc_now,
) -> int:
    """Run `gpu-pool`; returns the exit code. out/err/sleep/clock are injectable for tests."""
    ctx = _Io(out or sys.stdout, err or sys.stderr, sleep, clock)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "node-check":
            return run_node_check(args, ctx.out)
        if args.command == "discover":
            return discover_cli.run(args, ctx.out)
        if args.command == "repair":
            return repair_cli.run(args, ctx.out, ctx.err, args.now or ctx.clock())
        facts = load_stack(args.stack, Path(args.stack_dir)) if args.stack else PoolFacts()
        if args.command == "claims":
            return _run_claims(args, facts, ctx)
        return _run_doctor(args, facts, ctx)
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    except (Day2Error, NodeInputError) as error:
        ctx.err.write(f"{PROG}: {' '.join(str(error).split())}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as error:
        ctx.err.write(
            f"{PROG}: the day-2 tool's package {error.name} is not installed: "
            "run `uv sync --group day2` (or use make claims / make doctor)\n"
        )
        return 2
    except Exception as error:  # a bug, or a dump shaped like nothing Kubernetes writes
        if os.environ.get(DEBUG_ENV):
            raise
        ctx.err.write(f"{PROG}: unexpected error: {type(error).__name__}: {' '.join(str(error).split())[:300]}")
        ctx.err.write(f" (set {DEBUG_ENV}=1 for the traceback)\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
