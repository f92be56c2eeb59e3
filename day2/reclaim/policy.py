"""The notebook reclaim policy in the cluster (reclaim.idleNotebooks): every checkEveryMinutes it reads the pool
through the one Kubernetes client (node/kube.py, REST as its ServiceAccount), what DCGM saw of each card from
Prometheus (day2/reclaim/evidence.py), judges (day2/reclaim/judge.py), and acts on each decision
(day2/reclaim/actions.py): a warning's annotations and Event, Kubeflow's stop, a withdrawn warning. With dryRun it
acts on none and reports the same decisions: one JSON line each in its log (day2/reclaim/report.py, the shape
`gpu-pool claims --reclaimable -o json` prints) and its metrics.

The stack packs it with its import closure (components/shared/payload.py) and runs it from a ConfigMap on a stock
python image: standard library only. Its requests are components/reclaim/api.py's table; its RBAC is derived from it.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from components.reclaim.names import (
    AMBIGUOUS_CARDS,
    COMPONENT,
    DECISIONS,
    DRY_RUN,
    FREED_GPU_HOURS,
    LAST_PASS,
    METRICS_PORT,
    NOT_BACK_SECONDS,
    PASS_ERRORS,
    STOPS,
)
from config.arguments import ArgumentParser
from config.prometheus_access import policy_access
from day2.errors import Day2Error
from day2.metrics_http import serve_metrics
from day2.objects import JsonObject, Snapshot
from day2.reclaim.actions import event_text, freed_gpus, notebook_event, notebook_patch
from day2.reclaim.evidence import PrometheusSource, read_evidence
from day2.reclaim.judge import Action, Judgement, Policy, judge
from day2.reclaim.report import decision_json
from knowledge.kubeflow import NOTEBOOK_GROUP, NOTEBOOK_PLURAL, NOTEBOOK_VERSION, notebooks_path
from node.kube import ApiError, Conflict, Kube, Rest

# What a pass reads, each listed across namespaces.
READS: tuple[tuple[str, str], ...] = (
    ("Node", "/api/v1/nodes"),
    ("Pod", "/api/v1/pods"),
    ("Namespace", "/api/v1/namespaces"),
    ("ResourceQuota", "/api/v1/resourcequotas"),
    ("Notebook", notebooks_path()),
)
PROMETHEUS_KEY = "gpu-pool:reclaim.idleNotebooks.prometheusUrl"


class KubeApi(Protocol):
    """What the policy asks of the Kubernetes client (node/kube.py Kube): list, patch, create."""

    def list(self, path: str, kind: str) -> list[dict[str, Any]]: ...

    def patch(self, path: str, patch: Any, content_type: str = ...) -> Any: ...

    def create(self, path: str, body: Any, retry: bool = ...) -> Any: ...


@dataclass(frozen=True)
class PolicyFacts:
    """What the stack hands the policy (components/reclaim/objects.py writes it from the config)."""

    policy: Policy
    prometheus_url: str
    dry_run: bool
    check_every_minutes: int

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> PolicyFacts:
        return cls(
            policy=Policy.from_document(document),
            prometheus_url=str(document["prometheusUrl"]),
            dry_run=bool(document["dryRun"]),
            check_every_minutes=int(document["checkEveryMinutes"]),
        )


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


@dataclass
class Metrics:
    """What the policy exports (components/reclaim/names.py names them; its alerts read them)."""

    dry_run: bool = False
    stops: dict[str, int] = field(default_factory=dict)
    freed_gpu_hours: float = 0.0
    errors: int = 0
    last_pass: float | None = None
    judgement: Judgement | None = None
    at: datetime.datetime | None = None

    def text(self) -> str:
        lines = [
            f"# TYPE {STOPS} counter",
            *(f'{STOPS}{{namespace="{_label_value(ns)}"}} {n}' for ns, n in sorted(self.stops.items())),
            f"# TYPE {FREED_GPU_HOURS} counter",
            f"{FREED_GPU_HOURS} {self.freed_gpu_hours:.6f}",
            f"# TYPE {PASS_ERRORS} counter",
            f"{PASS_ERRORS} {self.errors}",
            f"# TYPE {DRY_RUN} gauge",
            f"{DRY_RUN} {int(self.dry_run)}",
        ]
        if self.last_pass is not None:
            lines += [f"# TYPE {LAST_PASS} gauge", f"{LAST_PASS} {self.last_pass:.3f}"]
        judgement, at = self.judgement, self.at
        if judgement is not None and at is not None:
            counted: dict[tuple[str, str], int] = {}
            for d in judgement.decisions:
                counted[(d.reason.value, d.action.value)] = counted.get((d.reason.value, d.action.value), 0) + 1
            lines.append(f"# TYPE {DECISIONS} gauge")
            lines += [f'{DECISIONS}{{reason="{r}",action="{a}"}} {n}' for (r, a), n in sorted(counted.items())]
            lines.append(f"# TYPE {AMBIGUOUS_CARDS} gauge")
            lines += [f'{AMBIGUOUS_CARDS}{{node="{n}"}} {c}' for n, c in sorted(judgement.ambiguous.items())]
            lines.append(f"# TYPE {NOT_BACK_SECONDS} gauge")
            for s in judgement.not_back:
                labels = {
                    "namespace": s.namespace,
                    "notebook": s.notebook,
                    "pod": s.pod,
                    "node": s.node,
                    "phase": "Terminating" if s.terminating else "Running",
                    "finalizers": ",".join(s.finalizers) or "none",
                }
                rendered = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
                lines.append(f"{NOT_BACK_SECONDS}{{{rendered}}} {(at - s.since).total_seconds():.0f}")
        return "\n".join(lines) + "\n"


def read_pool(kube: KubeApi) -> Snapshot:
    items: list[JsonObject] = []
    for kind, path in READS:
        items += kube.list(path, kind)
    return Snapshot.from_items(items)


def notebook_path(namespace: str, name: str) -> str:
    quoted = urllib.parse.quote
    return f"/apis/{NOTEBOOK_GROUP}/{NOTEBOOK_VERSION}/namespaces/{quoted(namespace)}/{NOTEBOOK_PLURAL}/{quoted(name)}"


@dataclass
class Reclaimer:
    """One policy process: its client, facts, log and metrics (the clock injectable, so tests set the time)."""

    kube: KubeApi
    facts: PolicyFacts
    out: TextIO
    metrics: Metrics
    host: str = field(default_factory=socket.gethostname)
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)

    def log(self, line: str) -> None:
        self.out.write(f"{self.clock().strftime('%Y-%m-%dT%H:%M:%SZ')} {line}\n")
        self.out.flush()


def act(runner: Reclaimer, world: Snapshot, judgement: Judgement, now: datetime.datetime) -> None:
    """Send each decision's patch and Event; a stop first, so its Event never tells of a stop that did not happen."""
    notebooks = {(n["metadata"]["namespace"], n["metadata"]["name"]): n for n in world.notebooks}
    for decision in judgement.decisions:
        notebook = notebooks[(decision.namespace, decision.notebook)]
        patch = notebook_patch(notebook, decision, now)
        if patch is None:
            continue
        try:
            runner.kube.patch(notebook_path(decision.namespace, decision.notebook), patch)
        except Conflict:
            runner.log(f"{decision.namespace}/{decision.notebook} changed since it was read: judged again next pass")
            continue
        if decision.action is Action.STOP:
            runner.metrics.stops[decision.namespace] = runner.metrics.stops.get(decision.namespace, 0) + 1
        text = event_text(decision, runner.facts.policy)
        if text is not None:
            event = notebook_event(notebook, *text, now, runner.host)
            try:
                runner.kube.create(f"/api/v1/namespaces/{decision.namespace}/events", event)
            except ApiError as error:
                # The annotations are the record; an Event is for people and expires within hours anyway.
                runner.log(f"{decision.namespace}/{decision.notebook}: its Event was not posted: {error}")


def one_pass(runner: Reclaimer) -> Judgement:
    """Read, judge, act (or, dry, only report): one pass at the runner's clock."""
    now = runner.clock()
    facts = runner.facts
    world = read_pool(runner.kube)
    access = policy_access(facts.prometheus_url, os.environ)
    source = PrometheusSource(facts.prometheus_url, named=PROMETHEUS_KEY, authorization=access.authorization)
    evidence = read_evidence(source, facts.policy.idle_hours, now)
    if not evidence.cards:
        # Every notebook is then "unknown": say where to look rather than only never stop one.
        runner.log(
            f"Prometheus at {facts.prometheus_url} has no per-card series: is the GPU PrometheusRule's gpu-pool.cards "
            "group loaded (monitoring.alertsEnabled), and does that Prometheus scrape dcgm-exporter?"
        )
    judgement = judge(world, evidence, facts.policy, now)
    for decision in judgement.decisions:
        runner.log("decision " + json.dumps(decision_json(decision), sort_keys=True))
    if not facts.dry_run:
        act(runner, world, judgement, now)
    metrics = runner.metrics
    if metrics.at is not None and not facts.dry_run:
        hours = max(0.0, (now - metrics.at).total_seconds() / 3600)
        metrics.freed_gpu_hours += freed_gpus(world, judgement.not_back) * hours
    metrics.judgement, metrics.at, metrics.last_pass = judgement, now, now.timestamp()
    counts = {a: sum(1 for d in judgement.decisions if d.action is a) for a in Action}
    dry = " (dryRun: nothing changed)" if facts.dry_run else ""
    runner.log(
        f"pass: {len(judgement.decisions)} notebook(s), {counts[Action.STOP]} stopped, {counts[Action.WARN]} warned, "
        f"{counts[Action.WAIT]} in grace, {len(judgement.not_back)} card(s) not back{dry}"
    )
    return judgement


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = ArgumentParser(prog="gpu-pool reclaim-policy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", required=True, type=Path, help="the policy's facts (JSON, from the stack)")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--metrics-port", type=int, default=METRICS_PORT, help=f"/metrics (default {METRICS_PORT})")
    args = parser.parse_args(argv)
    try:
        facts = PolicyFacts.from_json(json.loads(args.facts.read_text(encoding="utf-8")))
        kube = Kube(Rest.in_cluster(), component=COMPONENT)
    except (OSError, ValueError, KeyError, TypeError, ApiError) as error:
        out.write(f"gpu-pool reclaim-policy: {error}\n")
        return 2
    runner = Reclaimer(kube, facts, out, Metrics(dry_run=facts.dry_run))
    if args.metrics_port:
        serve_metrics(runner.metrics.text, args.metrics_port)
    while True:
        try:
            one_pass(runner)
        except (ApiError, Day2Error, OSError) as error:
            # One bad pass (Prometheus or the API away) is logged and counted; the next reads everything again.
            runner.metrics.errors += 1
            runner.log(f"pass failed: {error}")
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(facts.check_every_minutes * 60)
