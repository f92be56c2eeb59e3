"""What the watcher reads of the stack (day2/repair/watcher_core.py WatcherFacts), as the JSON the stack writes into
the watcher's ConfigMap beside its code: computed here from the validated config, so the watcher in the cluster
runs without pydantic or the config models, as the health check does with its pool facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.gpu_failure_domain.observed import ObservedNode
from components.gpu_failure_domain.plan import plan_domain
from components.gpu_failure_domain.steps import RepairSmokeStep
from components.gpu_failure_domain.turns import repair_turn
from components.unattended.credential import credential_plan
from components.unattended.node_check_job import node_check_flags, node_check_job
from components.unattended.watcher_api import EVENTS_NAMESPACE
from config.stack import StackConfig
from node.proxmox import proxmox_facts


def allowed_privileges(stack: StackConfig, stack_name: str) -> dict[str, list[str]]:
    """Path -> the privileges the token's roles grant there: what `GET /access/permissions` may show, no more."""
    plan = credential_plan(stack, stack_name)
    roles = {role.role_id: role for role in plan.roles}
    allowed: dict[str, set[str]] = {}
    for row in plan.acls:
        allowed.setdefault(row.path, set()).update(roles[row.role_id].privileges)
    return {path: sorted(privileges) for path, privileges in sorted(allowed.items())}


def smoke_jobs(stack: StackConfig) -> dict[str, list[dict[str, Any]]]:
    """Hostname -> the smoke Jobs a repair's turn runs on it after the power cycle (the plan's own, as `gpu-pool
    repair` runs them; the watcher names each per run). None where the stack runs no smoke test."""
    if not stack.smoke_test.enabled:
        return {}
    jobs: dict[str, list[dict[str, Any]]] = {}
    for domain in stack.failure_domains:
        turn = repair_turn(domain, ObservedNode(rollout={}), "unattended", "2026-01-01T00:00:00Z")
        plan = plan_domain(domain, stack, turn, holder="repair:unattended@facts")
        jobs[domain.hostname] = [dict(s.manifest) for s in plan.turn_steps() if isinstance(s, RepairSmokeStep)]
    return jobs


def watcher_facts_document(stack: StackConfig, stack_name: str, pool: Mapping[str, Any]) -> dict[str, Any]:
    """The facts; `pool` is doctor's pool facts as the health check's ConfigMap holds them."""
    cfg = stack.repair.unattended
    plan = credential_plan(stack, stack_name)
    return {
        "stack": stack_name,
        "unattended": {
            "decisions": list(cfg.decisions),
            "maxPerDay": stack.repair.max_per_day,
            "breakerFailures": cfg.breaker_failures,
            "breakerWindow": cfg.breaker_window,
            "domains": [
                {"name": d.name, "hostname": d.hostname, "proxmoxNode": d.proxmox_node} for d in stack.failure_domains
            ],
        },
        "pool": dict(pool),
        "namespace": cfg.namespace,
        "eventsNamespace": EVENTS_NAMESPACE,
        "proxmox": proxmox_facts(stack.proxmox.endpoint, stack.proxmox.insecure, stack.trusted_ca),
        "vms": {
            d.name: {
                "vmid": str(d.vm_id),
                "proxmoxNode": d.proxmox_node,
                "mappings": [
                    row.path.removeprefix("/mapping/pci/")
                    for row in plan.acls
                    if row.domain == d.name and row.path.startswith("/mapping/pci/")
                ],
            }
            for d in stack.failure_domains
        },
        "allowed": allowed_privileges(stack, stack_name),
        "nodeCheckJobs": {
            d.hostname: node_check_job(cfg, d.hostname, node_check_flags(stack, d), f"node-check-{d.hostname}")
            for d in stack.failure_domains
        },
        "notEligible": dict(plan.not_eligible),
        "smokeJobs": smoke_jobs(stack),
    }
