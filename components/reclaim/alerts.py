"""The notebook reclaim policy's alerts, on the metrics it exports (components/reclaim/names.py), naming what to do;
promtool evaluates them on those series (tests/reclaim/test_alerts_promtool.py). Registered with the policy where
monitoring.alertsEnabled.

- GpuNotebookCardNotBack: a notebook the policy stopped still has a pod holding its card past cardBackMinutes (the
  article: replicas=0 is not proof a card came back), named with the pod, its node and its finalizers. The policy
  stops no other notebook meanwhile.
- GpuNotebookReclaimStalled: the policy has not finished a pass for three of its intervals (Prometheus or the API
  server does not answer it, or it is not running): idle cards are not given back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from components.reclaim.names import LAST_PASS, NOT_BACK_SECONDS
from components.shared.prometheus_rules import alert, prometheus_rule
from config.monitoring import MonitoringConfig

if TYPE_CHECKING:
    from config.reclaim import IdleNotebooksConfig

RULE_NAME = "gpu-pool-reclaim"
GROUP_NAME = "gpu-pool.reclaim"
STALLED_PASSES = 3
RUNBOOK_ANCHORS: Mapping[str, str] = {
    "GpuNotebookCardNotBack": "alert-gpunotebookcardnotback",
    "GpuNotebookReclaimStalled": "alert-gpunotebookreclaimstalled",
}
# The labels the not-back series carries, kept by the alert so its annotations can name them.
NOT_BACK_LABELS = ("namespace", "notebook", "pod", "node", "phase", "finalizers")


def _alert(monitoring: MonitoringConfig, name: str, **fields: Any) -> dict[str, Any]:
    return alert(monitoring, name, anchor=RUNBOOK_ANCHORS[name], **fields)


def build_reclaim_alert_rules(
    monitoring: MonitoringConfig, cfg: IdleNotebooksConfig, *, labels: Mapping[str, str]
) -> dict[str, Any]:
    pod = "{{ $labels.namespace }}/{{ $labels.pod }}"
    deadline = cfg.card_back_minutes * 60
    stalled = STALLED_PASSES * cfg.check_every_minutes * 60
    rules = [
        _alert(
            monitoring,
            "GpuNotebookCardNotBack",
            expr=f"max by ({', '.join(NOT_BACK_LABELS)}) ({NOT_BACK_SECONDS}) > {deadline}",
            for_="0m",
            severity="warning",
            summary=f"{pod} still holds its GPU {{{{ $value | humanizeDuration }}}} after notebook "
            "{{ $labels.notebook }} was stopped",
            description=(
                f"gpu-pool stopped notebook {{{{ $labels.namespace }}}}/{{{{ $labels.notebook }}}} "
                f"(kubeflow-resource-stopped) over {cfg.card_back_minutes} minutes ago and its pod {pod} still holds "
                "its nvidia.com/gpu on {{ $labels.node }} ({{ $labels.phase }}; finalizers: "
                "{{ $labels.finalizers }}). A pod held in Terminating by a finalizer keeps its card until the "
                "controller that owns the finalizer removes it: find it from the finalizer's name, or, once sure "
                "nothing needs it, kubectl -n {{ $labels.namespace }} patch pod {{ $labels.pod }} --type merge "
                '-p \'{"metadata":{"finalizers":null}}\'. The policy stops no other notebook until the card is '
                "back."
            ),
        ),
        _alert(
            monitoring,
            "GpuNotebookReclaimStalled",
            expr=f"time() - max({LAST_PASS}) > {stalled}",
            for_="5m",
            severity="warning",
            summary="The notebook reclaim policy has not finished a pass for {{ $value | humanizeDuration }}",
            description=(
                f"The policy in {cfg.namespace} looks every {cfg.check_every_minutes} minutes and has not finished a "
                f"pass for over {STALLED_PASSES} of them: idle cards are not given back. Its log says why "
                f"(kubectl -n {cfg.namespace} logs deploy/gpu-pool-reclaim): Prometheus at "
                f"{cfg.prometheus_url or '(prometheusUrl)'} or the API server not answering, or a refused request."
            ),
        ),
    ]
    return prometheus_rule(RULE_NAME, monitoring.rules_namespace, labels, [{"name": GROUP_NAME, "rules": rules}])
