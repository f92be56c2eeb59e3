"""The notebook reclaim policy in the cluster (`reclaim.idleNotebooks.enabled`): thin over the pure plan
(components/reclaim/objects.py plan_objects). It registers exactly the planned objects: the namespace, then its
account, RBAC and code, the Deployment once they are there, and its Service, ServiceMonitor and alerts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes

from components.reclaim.names import NAME
from components.reclaim.objects import (
    PROMETHEUS_SECRET,
    PROMETHEUS_SECRET_KEY,
    ReclaimObjects,
    plan_objects,
    policy_zip,
)
from components.shared.kubernetes_objects import register_object
from config.stack import StackConfig


@dataclass(frozen=True)
class NotebookReclaimArgs:
    stack: StackConfig
    kubernetes_provider: kubernetes.Provider
    # The PrometheusRule's labels (components/gpu_platform/alert_rules.py prometheus_rule_labels), for its alerts.
    rule_labels: Mapping[str, str]
    # gpu-pool:prometheusAuth: into a Secret the policy's container reads by secretKeyRef, nowhere else.
    prometheus_auth: pulumi.Output[str] | None = None


def _resource_name(name: str, obj: Mapping[str, Any]) -> str:
    return f"{name}-{str(obj['kind']).lower()}"


class NotebookReclaim(pulumi.ComponentResource):
    def __init__(self, name: str, args: NotebookReclaimArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-pool:index:NotebookReclaim", name, None, opts)
        cfg = args.stack.reclaim.idle_notebooks
        login = args.prometheus_auth
        planned: ReclaimObjects = plan_objects(
            cfg, args.stack.monitoring, args.rule_labels, policy_zip(), prometheus_login=login is not None
        )
        k8s = pulumi.ResourceOptions(parent=self, provider=args.kubernetes_provider)
        namespace = register_object(_resource_name(name, planned.namespace), planned.namespace, k8s)
        placed = pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[namespace]))
        after: list[pulumi.Resource] = [
            register_object(_resource_name(name, obj), obj, placed) for obj in planned.placed
        ]
        if login is not None:
            # The SDK's typed Secret marks its data secret in the state and every diff.
            metadata: Any = {"name": PROMETHEUS_SECRET, "namespace": cfg.namespace}
            value: pulumi.Output[str] = pulumi.Output.secret(login)
            secret = kubernetes.core.v1.Secret(
                f"{name}-prometheus-login",
                metadata=metadata,
                type="Opaque",
                string_data={PROMETHEUS_SECRET_KEY: value},
                opts=placed,
            )
            after.append(secret)
        deployment: Any = planned.deployment
        kubernetes.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=deployment["metadata"],
            spec=deployment["spec"],
            opts=pulumi.ResourceOptions.merge(placed, pulumi.ResourceOptions(depends_on=after)),
        )
        for obj in planned.monitoring:
            if obj["kind"] == "Service":
                service: Any = obj
                kubernetes.core.v1.Service(
                    f"{name}-service", metadata=service["metadata"], spec=service["spec"], opts=placed
                )
            else:
                register_object(_resource_name(name, obj), obj, placed)
        self.register_outputs({"policy": NAME, "namespace": cfg.namespace, "dryRun": cfg.dry_run})
