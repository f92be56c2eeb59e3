"""`gpu-pool claims --reclaimable`: what the notebook reclaim policy (reclaim.idleNotebooks) would stop, warn and leave
alone, and why, from a dump or a live cluster and a Prometheus URL: the judgement the policy runs in the cluster
(day2/reclaim/judge.py) on the same evidence (day2/reclaim/evidence.py), so a person sees what it would do before
enabling it. It changes nothing.

The policy's values come from `--stack` (its reclaim.idleNotebooks), else the config's defaults.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from day2.arguments import prometheus_access
from day2.command import ExitStatus, Io
from day2.errors import Day2Error
from day2.objects import Snapshot
from day2.reclaim.evidence import PrometheusSource, read_evidence
from day2.reclaim.judge import Policy, judge
from day2.reclaim.report import judgement_json, print_judgement
from day2.sources import load_dump, load_live

DUMP_COMMAND = "kubectl get nodes,pods,namespaces,resourcequotas,notebooks.kubeflow.org -A -o json"
NEEDS = ("Node", "Pod")


def policy_of(args: argparse.Namespace) -> tuple[Policy, bool, str | None, str | None]:
    """(the policy, whether it only reports, the kubeconfig and context) of `--stack`, else the config's defaults."""
    from config.reclaim import IdleNotebooksConfig  # pydantic: only where a policy is read

    if not args.stack:
        cfg = IdleNotebooksConfig()
        return Policy.from_document(cfg.model_dump(mode="json", by_alias=True)), cfg.dry_run, None, None
    from day2.pool import read_stack

    stack = read_stack(args.stack, Path(args.stack_dir))
    cfg = stack.reclaim.idle_notebooks
    document = cfg.model_dump(mode="json", by_alias=True)
    return Policy.from_document(document), cfg.dry_run, stack.kubernetes.kubeconfig, stack.kubernetes.context


def _snapshot(args: argparse.Namespace, kubeconfig: str | None, context: str | None) -> Snapshot:
    if args.dump is not None:
        if args.kubeconfig or args.context:
            raise Day2Error("--from reads a dump; --kubeconfig and --context are for a live cluster")
        return load_dump(args.dump, NEEDS, "claims --reclaimable")
    return load_live(args.kubeconfig or kubeconfig, args.context or context, namespaces=True, reclaim=True)


def run_reclaimable(args: argparse.Namespace, io: Io) -> ExitStatus:
    if not args.prometheus:
        raise Day2Error(
            "--reclaimable judges idleness from DCGM's per-card series in Prometheus: pass --prometheus URL"
        )
    if args.watch is not None or args.usage:
        raise Day2Error("--reclaimable is a report of its own; drop --watch and --usage")
    policy, dry_run, kubeconfig, context = policy_of(args)
    snapshot = _snapshot(args, kubeconfig, context)
    now: datetime = args.now or io.clock()
    access = prometheus_access(args)
    evidence = read_evidence(PrometheusSource(access.url, authorization=access.authorization), policy.idle_hours, now)
    judgement = judge(snapshot, evidence, policy, now)
    if args.output == "json":
        io.out.write(json.dumps(judgement_json(judgement, policy, now, dry_run=dry_run), indent=2) + "\n")
    else:
        print_judgement(judgement, policy, io.out)
        if not snapshot.notebooks and args.dump is not None:
            io.out.write(f"The dump holds no Notebooks: write it with `{DUMP_COMMAND} > dump.json`.\n")
    return ExitStatus.SUCCESS
