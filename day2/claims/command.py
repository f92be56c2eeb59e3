"""`gpu-pool claims`: GPUs per node, who holds them, who waits (and, with --prometheus, who holds one idle)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from datetime import datetime

from config.prometheus_access import PrometheusAccess
from day2.arguments import (
    add_cluster_arguments,
    add_prometheus_login_arguments,
    duration_seconds,
    pool_facts,
    positive_seconds,
    prometheus_access,
    sampler,
)
from day2.claims.compute import DEFAULT_LONG_HELD_SECONDS, Claims, ClaimsOptions, compute_claims
from day2.claims.prometheus import idle_holders, peak_utilisation
from day2.claims.usage import prometheus_duration
from day2.command import ExitStatus, Io
from day2.errors import Day2Error
from day2.objects import Snapshot
from day2.pool import PoolFacts
from day2.sources import CLAIMS_NEEDS, load_dump, load_live

NAME = "claims"
HELP = "GPUs per node, who holds them, who waits"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cluster_arguments(parser)
    parser.add_argument(
        "--long-held",
        type=duration_seconds,
        default=DEFAULT_LONG_HELD_SECONDS,
        metavar="DURATION",
        help="flag holders bound longer than this (default: 7d)",
    )
    parser.add_argument("--prometheus", metavar="URL", help="flag holders whose GPU stayed idle (dcgm-exporter data)")
    add_prometheus_login_arguments(parser)
    parser.add_argument("--watch", type=positive_seconds, metavar="SECONDS", help="print free GPUs every SECONDS")
    parser.add_argument(
        "--usage", action="store_true", help="GPU-hours held per namespace and profile owner (needs --prometheus)"
    )
    parser.add_argument(
        "--since", type=_prometheus_range, default="7d", metavar="DURATION", help="--usage range (default: 7d)"
    )
    parser.add_argument(
        "--reclaimable",
        action="store_true",
        help="which Kubeflow notebooks the reclaim policy would stop, warn or leave, and why (needs --prometheus)",
    )


def _prometheus_range(text: str) -> str:
    try:
        return prometheus_duration(text.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _options(args: argparse.Namespace, facts: PoolFacts, now: datetime) -> ClaimsOptions:
    marking = facts.marking
    return ClaimsOptions(
        now=now,
        long_held_seconds=args.long_held,
        expected=facts.expected_slots(),
        gpu_node_label=(marking.label_key, marking.label_value),
    )


def _with_idle(
    snapshot: Snapshot, claims: Claims, options: ClaimsOptions, access: PrometheusAccess, facts: PoolFacts
) -> Claims:
    peaks = peak_utilisation(access.url, facts.idle_hours, options.now, access.headers())
    held = {(h.namespace, h.pod): h.age_seconds for h in claims.holders}
    idle = idle_holders(peaks, held, facts.idle_hours, facts.idle_percent)
    return compute_claims(snapshot, replace(options, idle=idle))


def _run_usage(args: argparse.Namespace, facts: PoolFacts, io: Io) -> ExitStatus:
    from day2.claims.usage import print_usage, profile_owners, read_usage, usage_json

    if not args.prometheus:
        raise Day2Error("--usage reads GPU-hours from the usage recording rules in Prometheus: pass --prometheus URL")
    if args.watch is not None:
        raise Day2Error("--usage is a report over a range; drop --watch")
    if args.dump is not None:
        if args.kubeconfig or args.context:
            raise Day2Error("--from reads a dump; --kubeconfig and --context are for a live cluster")
        snapshot = load_dump(args.dump)
    else:
        snapshot = load_live(args.kubeconfig or facts.kubeconfig, args.context or facts.context, namespaces=True)
    access = prometheus_access(args)
    usage = read_usage(access.url, args.since, args.now or io.clock(), profile_owners(snapshot), access.headers())
    if args.output == "json":
        io.out.write(json.dumps(usage_json(usage), indent=2) + "\n")
    else:
        print_usage(usage, io.out)
    return ExitStatus.SUCCESS


def run(args: argparse.Namespace, io: Io) -> ExitStatus:
    if args.reclaimable:
        from day2.claims.reclaimable import run_reclaimable

        return run_reclaimable(args, io)
    facts = pool_facts(args)
    if args.usage:
        return _run_usage(args, facts, io)
    sample = sampler(args, facts, CLAIMS_NEEDS)
    if args.watch is not None:
        from day2.claims.watch import watch  # prints with day2.render, which needs rich

        if args.prometheus:
            raise Day2Error("--watch prints free GPUs only; drop --prometheus")
        fixed = args.now

        def one(now: datetime) -> Claims:
            return compute_claims(sample(), _options(args, facts, fixed or now))

        return ExitStatus(watch(one, args.watch, io.out, as_json=args.output == "json", sleep=io.sleep, clock=io.clock))
    snapshot = sample()
    options = _options(args, facts, args.now or io.clock())
    claims = compute_claims(snapshot, options)
    if args.prometheus:
        claims = _with_idle(snapshot, claims, options, prometheus_access(args), facts)
    from day2 import render  # rich: imported once there is something to print

    if args.output == "json":
        render.write_json(render.claims_json(claims), io.out)
    else:
        shared = any(n.allocatable > 1 or (n.expected or 0) > 1 for n in claims.nodes)
        render.print_claims(claims, io.out, idle_checked=bool(args.prometheus), time_sliced=shared)
    return ExitStatus.SUCCESS
