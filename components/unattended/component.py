"""The unattended repair's credential and its place in the cluster (`repair.unattended.enabled`): thin over the
pure plan (components/unattended/credential.py) and objects (components/unattended/objects.py).

Proxmox: two roles (proxmoxve:index/roleLegacy:RoleLegacy), one privilege-separated token of the stack's own user
(proxmoxve:user/token:Token) and an ACL per row on the token (proxmoxve:index/acl:Acl, propagate false). The token's
secret (the provider's `value`, a secret output) goes straight into the Kubernetes Secret's `stringData` as a Pulumi
secret: never in the plan, the output or state in clear. `tokenGeneration` is in the token's name: raising it
replaces the token (the new one created first, then the Secret updated, then the old one deleted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as kubernetes
import pulumi_proxmoxve as proxmoxve

from components.shared.kubernetes_objects import register_object
from components.unattended.credential import TOKEN_SECRET_KEY, api_token, credential_plan, user_of
from components.unattended.objects import NAME, SECRET_NAME, build_watcher_access, build_watcher_rbac, meta
from components.unattended.rbac import watcher_rules
from config.stack import StackConfig


@dataclass(frozen=True)
class UnattendedRepairArgs:
    stack: StackConfig
    stack_name: str
    # The stack's own Proxmox credential (its API token, or root's password): the repair token is its user's.
    proxmox_credential: pulumi.Output[str]
    proxmox_provider: proxmoxve.Provider
    kubernetes_provider: kubernetes.Provider


class UnattendedRepair(pulumi.ComponentResource):
    def __init__(self, name: str, args: UnattendedRepairArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-pool:index:UnattendedRepair", name, None, opts)
        cfg = args.stack.repair.unattended
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
        acls = [
            proxmoxve.Acl(
                f"{name}-acl-{row.path.strip('/').replace('/', '-')}",
                path=row.path,
                role_id=roles[row.role_id].role_id,
                token_id=token_id,
                propagate=row.propagate,
                opts=pve,
            )
            for row in plan.acls
        ]
        k8s = pulumi.ResourceOptions(parent=self, provider=args.kubernetes_provider)
        objects = build_watcher_access(cfg)
        namespace = register_object(f"{name}-namespace", objects[0], k8s)
        placed = pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[namespace]))
        for obj in objects[1:]:
            register_object(f"{name}-{obj['kind'].lower()}", obj, placed)
        # What the repair turn's steps do in the cluster, derived from them (components/unattended/rbac.py).
        for obj in build_watcher_rbac(cfg, *watcher_rules(args.stack)):
            where = obj["metadata"].get("namespace")
            register_object(f"{name}-turn-{obj['kind'].lower()}" + (f"-{where}" if where else ""), obj, placed)
        secret_value: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(token_id, token.value).apply(lambda pair: api_token(pair[0], pair[1] or ""))
        )
        # The SDK's typed Secret: it wraps data and stringData in secrets and marks both outputs secret itself.
        # Any: a plain dict where the SDK's stubs want their TypedDict.
        secret_meta: Any = meta(SECRET_NAME, cfg.namespace)
        kubernetes.core.v1.Secret(
            f"{name}-secret",
            metadata=secret_meta,
            type="Opaque",
            string_data={TOKEN_SECRET_KEY: secret_value},
            opts=pulumi.ResourceOptions.merge(placed, pulumi.ResourceOptions(depends_on=acls)),
        )
        self.token_name = plan.token_name
        self.register_outputs({"token": plan.token_name, "roles": [r.role_id for r in plan.roles], "watcher": NAME})
