"""gpu-pool: Proxmox GPU passthrough and the RKE2 GPU tier as one Pulumi plan."""

from __future__ import annotations

import json
import sys

# PYTHONDONTWRITEBYTECODE, set in many CI and container images (and on the machine this is built on), makes every
# `pulumi preview` compile the provider SDKs' multi-megabyte modules again: it doubled a real-engine preview of prod
# (docs/engine.md). The Makefile unexports it for its own targets; this covers `pulumi` run directly. Python ignores
# a bytecode file it cannot write, so a read-only environment is unaffected.
sys.dont_write_bytecode = False

import os
from typing import NoReturn

import pulumi

from components.gpu_failure_domain.cluster_state import read_cluster_state
from components.gpu_failure_domain.component import GpuFailureDomain, GpuFailureDomainArgs
from components.gpu_failure_domain.host_preflight import datastore_needs, run_preflight, run_proxy_preflight
from components.gpu_failure_domain.plan import plan_domain, plan_wave, wave_export, wave_order
from components.gpu_platform.alert_rules import prometheus_rule_labels
from components.gpu_platform.cluster_preflight import run_cluster_preflight
from components.gpu_platform.component import GpuPlatform, GpuPlatformArgs
from components.gpu_platform.health_check import HealthCheckBundle
from components.reclaim.component import NotebookReclaim, NotebookReclaimArgs
from components.shared.kubectl import kubectl_prefix
from components.shared.language_host import (
    freeze_for_exit,
    send_sdk_debug_messages_in_background,
    settle_outputs_before_the_sdk_waits,
)
from components.shared.preflight import PreflightError
from components.shared.providers import build_kubernetes_provider, build_proxmox_provider, proxmox_credential_env
from components.stack_check import validate_stack
from components.unattended.component import UnattendedRepair, UnattendedRepairArgs
from components.unattended.credential import credential_dangers, credential_plan
from config.cross_key import config_warnings
from config.errors import ConfigError
from config.gpu_quotas import quota_warnings
from config.loader import load_config
from config.proxy import installer_hosts
from config.run_environment import environment_problems
from config.secrets import proxmox_credential

# Set by the offline preview (`make preview`): there is no Proxmox API, cluster or ssh-agent to ask.
OFFLINE = os.environ.get("GPU_POOL_OFFLINE") == "1"
# The SDK's four blocking debug messages per resource held up every registration behind them
# (components/shared/language_host.py).
send_sdk_debug_messages_in_background()
# The SDK's wait for outstanding outputs costs the square of the pool's size (components/shared/language_host.py).
settle_outputs_before_the_sdk_waits()


def refuse(title: str, messages: list[str]) -> NoReturn:
    # RunError: Pulumi prints the message alone, without the program's traceback.
    raise pulumi.RunError(f"{title}:\n  " + "\n  ".join(messages))


try:
    loaded = load_config(validate_stack)
except ConfigError as error:
    refuse("invalid stack config", error.messages)

cfg = loaded.stack
if not OFFLINE:
    problems = environment_problems(
        cfg, has_ssh_private_key=loaded.secrets.get("sshPrivateKey") is not None, environ=os.environ
    )
    if problems:
        refuse("this machine cannot run `pulumi up` for this stack", problems)
for warning in [*loaded.notes, *config_warnings(cfg), *quota_warnings(cfg.gpu_quotas, cfg.total_slots)]:
    pulumi.log.warn(warning)

proxmox_provider = build_proxmox_provider(loaded)
try:
    preflight = run_preflight(
        cfg.failure_domains,
        enabled=cfg.preflight.enabled,
        host_check=cfg.preflight.host_check,
        ssh_user=cfg.proxmox.ssh.username,
        node_addresses=cfg.proxmox.ssh.node_addresses,
        ssh_port=cfg.proxmox.ssh.port,
        provider=proxmox_provider,
        offline=OFFLINE,
        datastores=datastore_needs(cfg.proxmox),
    )
    cluster_preflight = run_cluster_preflight(
        cfg, kubectl_prefix(cfg.kubernetes.kubeconfig, cfg.kubernetes.context), offline=OFFLINE
    )
    cluster_state = read_cluster_state(
        cfg, kubectl_prefix(cfg.kubernetes.kubeconfig, cfg.kubernetes.context), offline=OFFLINE
    )
except PreflightError as error:
    refuse("preflight failed", error.messages)
# A proxy with a login is not checked so: its login would be on the hosts' command lines.
if not OFFLINE and cfg.preflight.enabled and cfg.preflight.host_check and cfg.proxy.enabled and not cfg.proxy.login:
    # The proxy from each Proxmox host: a CONNECT it refuses is a VM that never installs RKE2 (docs/air-gap.md).
    for warning in run_proxy_preflight(
        [domain.proxmox_node for domain in cfg.failure_domains],
        proxy=cfg.proxy.https or cfg.proxy.http or "",
        hosts=installer_hosts(cfg.proxy, cfg.rke2),
        ssh_user=cfg.proxmox.ssh.username,
        node_addresses=cfg.proxmox.ssh.node_addresses,
        ssh_port=cfg.proxmox.ssh.port,
    ):
        pulumi.log.warn(warning)
if cluster_preflight.adopting:
    pulumi.log.warn(cluster_preflight.summary)
kubernetes_provider = build_kubernetes_provider(loaded)

# Day 2: each domain's turn from what its Node says; the disruptive ones one batch after another.
wave = plan_wave(cfg, cluster_state.nodes, cluster_state.server_version)
if wave.problems:
    refuse("invalid stack config", wave.problems)
if wave.holds and not OFFLINE:
    # A repair holds a domain this up must turn: refused before anything runs (make diff shows it as a danger).
    refuse("a repair holds a domain this up must turn", wave.holds)
for danger in wave.dangers:
    pulumi.log.warn(danger)

# The in-cluster health check's code and the pool's facts, from this checkout and the stack (repair.healthCheck).
health_check = None
if cfg.repair.health_check.enabled:
    health_check = HealthCheckBundle.of(cfg, pulumi.get_stack())
platform = GpuPlatform(
    "gpu-platform",
    GpuPlatformArgs(
        stack=cfg,
        kubernetes_provider=kubernetes_provider,
        health_check=health_check,
        stack_name=pulumi.get_stack(),
        proxy_auth=loaded.secrets.get("proxyAuth"),
    ),
)
credential_env = proxmox_credential_env(loaded)
# The unattended repair (repair.unattended, off by default): its least-privilege Proxmox token and its Secret, and
# the in-cluster watcher that uses them (components/unattended/component.py).
if cfg.repair.unattended.enabled:
    for danger in credential_dangers(cfg, credential_plan(cfg, pulumi.get_stack())):
        pulumi.log.warn(danger)
    UnattendedRepair(
        "unattended-repair",
        UnattendedRepairArgs(
            stack=cfg,
            stack_name=pulumi.get_stack(),
            proxmox_credential=loaded.secrets.require(proxmox_credential(cfg.proxmox.auth).key),
            proxmox_provider=proxmox_provider,
            kubernetes_provider=kubernetes_provider,
            # repair.unattended needs repair.healthCheck (config/repair.py): its facts are the health check's.
            pool_facts=json.loads(health_check.facts) if health_check is not None else {},
            rule_labels=prometheus_rule_labels(cfg.monitoring),
        ),
    )
# The notebook reclaim policy (reclaim.idleNotebooks, off by default): stops a Kubeflow notebook that sits on an idle
# card while others wait, the way Kubeflow stops it (components/reclaim/component.py).
if cfg.reclaim.idle_notebooks.enabled:
    NotebookReclaim(
        "notebook-reclaim",
        NotebookReclaimArgs(
            stack=cfg,
            kubernetes_provider=kubernetes_provider,
            rule_labels=prometheus_rule_labels(cfg.monitoring),
            prometheus_auth=loaded.secrets.get("prometheusAuth"),
        ),
    )
by_name = {domain.name: domain for domain in cfg.failure_domains}
plans = {
    name: plan_domain(by_name[name], cfg, wave.turns[name], holder=f"up:{pulumi.get_stack()}")
    for name in wave_order(cfg)
}
domains: dict[str, GpuFailureDomain] = {}
# Created batch by batch, so a domain's turn can wait for the previous batch's last steps (`-rollout`).
batched = [name for batch in wave.batches for name in batch]
for name in batched + [name for name in plans if name not in batched]:
    domains[name] = GpuFailureDomain(
        name,
        GpuFailureDomainArgs(
            domain=by_name[name],
            stack=cfg,
            plan=plans[name],
            rke2_token=loaded.secrets.require("rke2Token"),
            proxmox_credential_env=credential_env,
            proxmox_provider=proxmox_provider,
            kubernetes_provider=kubernetes_provider,
            platform=platform.handles,
            ssh_private_key=loaded.secrets.get("sshPrivateKey"),
            registry_auth=loaded.secrets.get("registryAuth"),
            proxy_auth=loaded.secrets.get("proxyAuth"),
            wave_after=tuple(domains[before].rollout_done for before in wave.previous(name)),
        ),
    )

pulumi.export(
    "failureDomains",
    {
        name: {
            "nodeName": domain.node_name,
            "vmId": domain.vm_id,
            "zone": domain.zone,
            "sharingProfile": domain.sharing_profile,
            "gpuSlots": domain.gpu_slots,
            "preflight": preflight[name],
        }
        for name, domain in sorted(domains.items(), key=lambda item: list(by_name).index(item[0]))
    },
)
pulumi.export("clusterPreflight", cluster_preflight.summary)
if wave.active:
    pulumi.export("wave", wave_export(wave, plans, cluster_state.source))
pulumi.export("schedulableGpuSlots", cfg.total_slots)
pulumi.export("gpuOperator", {"chart": cfg.gpu_operator.chart_version, "driver": cfg.gpu_operator.driver_version})

# Everything alive now lives until the process exits: frozen, Python's exit skips it (language_host.py).
freeze_for_exit()
