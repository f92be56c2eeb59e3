"""The unattended repair's credential and its place in the cluster (`repair.unattended.enabled`): thin over the
pure plan (components/unattended/credential.py) and objects (components/unattended/objects.py).

Proxmox: two roles (proxmoxve:index/roleLegacy:RoleLegacy), one privilege-separated token of the stack's own user
(proxmoxve:user/token:Token) and an ACL per row on the token (proxmoxve:index/acl:Acl, propagate false). The token's
secret (the provider's `value`, a secret output) goes straight into the Kubernetes Secret's `stringData` as a Pulumi
secret: never in the plan, the output or state in clear. `tokenGeneration` is in the token's name: raising it
replaces the token (the new one created first, then the Secret updated, then the old one deleted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes
import pulumi_proxmoxve as proxmoxve

from components.shared.kubernetes_objects import register_object
from components.unattended.alerts import build_unattended_alert_rules
from components.unattended.credential import TOKEN_SECRET_KEY, api_token, credential_plan, user_of
from components.unattended.node_check_job import node_check_code, node_check_namespace, node_check_zip
from components.unattended.objects import NAME, SECRET_NAME, build_watcher_access, build_watcher_rbac, meta
from components.unattended.rbac import watcher_rules
from components.unattended.watcher import (
    code_digest,
    watcher_code,
    watcher_deployment,
    watcher_service,
    watcher_service_monitor,
    watcher_zip,
)
from components.unattended.watcher_facts import watcher_facts_document
from config.stack import StackConfig


@dataclass(frozen=True)
class UnattendedRepairArgs:
    stack: StackConfig
    stack_name: str
    # The stack's own Proxmox credential (its API token, or root's password): the repair token is its user's.
    proxmox_credential: pulumi.Output[str]
    proxmox_provider: proxmoxve.Provider
    kubernetes_provider: kubernetes.Provider
    # doctor's pool facts, as the health check's ConfigMap holds them (HealthCheckBundle.facts, parsed): the
    # watcher walks doctor's floors with them.
    pool_facts: Mapping[str, Any]
    # The PrometheusRule's labels (components/gpu_platform/alert_rules.py prometheus_rule_labels), for its alerts.
    rule_labels: Mapping[str, str]


class UnattendedRepair(pulumi.ComponentResource):
    def __init__(self, name: str, args: UnattendedRepairArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-pool:index:UnattendedRepair", name, None, opts)
        plan = credential_plan(args.stack, args.stack_name)
        pve = pulumi.ResourceOptions(parent=self, provider=args.proxmox_provider)
        roles = {
            role.role_id: proxmoxve.RoleLegacy(
                f"{name}-role-{kind}", role_id=role.role_id, privileges=list(role.privileges), opts=pve
            )
            for kind, role in (("vm", plan.vm_role), ("mapping", plan.mapping_role))
        }
        # The user is read from the stack's credential, itself a secret: only `user@realm` of it is kept.
        user_id = args.proxmox_credential.apply(user_of)
        token = proxmoxve.user.Token(
            f"{name}-token",
            user_id=user_id,
            token_name=plan.token_name,
            privileges_separation=True,
            comment=f"gpu-pool unattended repair of stack {args.stack_name}: power-cycle and read its GPU VMs only",
            opts=pulumi.ResourceOptions.merge(
                pve,
                # A new generation is a new token: created first, so the Secret never names a deleted one.
                pulumi.ResourceOptions(replace_on_changes=["tokenName"], additional_secret_outputs=["value"]),
            ),
        )
        token_id = pulumi.Output.concat(user_id, "!", plan.token_name)
        # Each ACL depends on the token: PVE refuses an ACL for a token that does not exist yet and the delete of one
        # whose token is gone (pve-access-control ACL.pm update_acl, check_token_exist: FIELD-REVIEW-6 W-1), so
        # the engine creates the token first and deletes its ACLs before it. The id's value is unchanged.
        after_token = pulumi.ResourceOptions.merge(pve, pulumi.ResourceOptions(depends_on=[token]))
        acls = [
            proxmoxve.Acl(
                f"{name}-acl-{row.path.strip('/').replace('/', '-')}",
                path=row.path,
                role_id=roles[row.role_id].role_id,
                token_id=token_id,
                propagate=row.propagate,
                opts=after_token,
            )
            for row in plan.acls
        ]
        k8s = pulumi.ResourceOptions(parent=self, provider=args.kubernetes_provider)
        secret = self._kubernetes(name, args, k8s, token_id, token, acls)
        self.token_name = plan.token_name
        self.secret = secret
        self.register_outputs({"token": plan.token_name, "roles": [r.role_id for r in plan.roles], "watcher": NAME})

    def _kubernetes(
        self,
        name: str,
        args: UnattendedRepairArgs,
        k8s: pulumi.ResourceOptions,
        token_id: pulumi.Output[str],
        token: proxmoxve.user.Token,
        acls: list[proxmoxve.Acl],
    ) -> kubernetes.core.v1.Secret:
        """The watcher in the cluster: its namespace and the node-check Jobs' (Pod Security restricted and
        privileged), its ServiceAccount, breaker and Lease, the RBAC its steps need, the token's Secret, its code
        and facts, and the Deployment, which starts only once the rest is there."""
        cfg = args.stack.repair.unattended
        objects = build_watcher_access(cfg)
        namespace = register_object(f"{name}-namespace", objects[0], k8s)
        checks = register_object(f"{name}-node-check-namespace", node_check_namespace(cfg), k8s)
        placed = pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[namespace, checks]))
        after: list[pulumi.Resource] = [
            register_object(f"{name}-{obj['kind'].lower()}", obj, placed) for obj in objects[1:]
        ]
        after.append(register_object(f"{name}-node-check-code", node_check_code(cfg, node_check_zip()), placed))
        # What the watcher's steps do in the cluster, derived from them (components/unattended/watcher_api.py).
        time_slicing = str(args.pool_facts["timeSlicingConfigMap"])
        for obj in build_watcher_rbac(cfg, *watcher_rules(args.stack, time_slicing)):
            where = obj["metadata"].get("namespace")
            resource = f"{name}-turn-{obj['kind'].lower()}" + (f"-{where}" if where else "")
            after.append(register_object(resource, obj, placed))
        secret_value: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(token_id, token.value).apply(lambda pair: api_token(pair[0], pair[1] or ""))
        )
        # The SDK's typed Secret: it wraps data and stringData in secrets and marks both outputs secret itself.
        # Any: a plain dict where the SDK's stubs want their TypedDict.
        secret_meta: Any = meta(SECRET_NAME, cfg.namespace)
        secret = kubernetes.core.v1.Secret(
            f"{name}-secret",
            metadata=secret_meta,
            type="Opaque",
            string_data={TOKEN_SECRET_KEY: secret_value},
            opts=pulumi.ResourceOptions.merge(placed, pulumi.ResourceOptions(depends_on=acls)),
        )
        facts = watcher_facts_document(args.stack, args.stack_name, args.pool_facts)
        code = watcher_code(cfg, watcher_zip(), facts)
        after += [secret, register_object(f"{name}-code", code, placed)]
        deployment: Any = watcher_deployment(cfg, code_digest(code))
        kubernetes.apps.v1.Deployment(
            f"{name}-watcher",
            metadata=deployment["metadata"],
            spec=deployment["spec"],
            opts=pulumi.ResourceOptions.merge(placed, pulumi.ResourceOptions(depends_on=after)),
        )
        self._monitoring(name, args, placed)
        return secret

    def _monitoring(self, name: str, args: UnattendedRepairArgs, placed: pulumi.ResourceOptions) -> None:
        """Its metrics scraped (monitoring.serviceMonitor) and its alerts (monitoring.alertsEnabled): the breaker open,
        a repair that did not fix."""
        cfg, monitoring = args.stack.repair.unattended, args.stack.monitoring
        service: Any = watcher_service(cfg)
        kubernetes.core.v1.Service(f"{name}-service", metadata=service["metadata"], spec=service["spec"], opts=placed)
        if monitoring.service_monitor:
            monitor = watcher_service_monitor(cfg, monitoring.service_monitor_labels)
            register_object(f"{name}-service-monitor", monitor, placed)
        if monitoring.alerts_enabled:
            rules = build_unattended_alert_rules(monitoring, cfg, stack=args.stack_name, labels=args.rule_labels)
            register_object(f"{name}-alerts", rules, placed)
