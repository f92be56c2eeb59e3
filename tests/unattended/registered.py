"""The unattended repair's component registered on its own under a test's Pulumi mocks, as the program registers it
(the program's own registration: tests/unattended/test_credential.py)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as kubernetes
import pulumi_proxmoxve as proxmoxve

from components.gpu_platform.alert_rules import prometheus_rule_labels
from components.gpu_platform.health_check import pool_facts_document
from components.unattended.component import UnattendedRepair, UnattendedRepairArgs
from config.stack import StackConfig
from offline.recording import Recording, RecordingMonitor
from offline.runner import execute

# The shape of the stack's own credential (an API token of its user): the repair token is that user's.
STACK_TOKEN = "pulumi@pve!gpu-pool=1b2c3d4e-0000-0000-0000-000000000000"


def register_unattended(monitor: RecordingMonitor, cfg: StackConfig, stack_name: str = "prod") -> Recording:
    def program() -> None:
        UnattendedRepair(
            "unattended-repair",
            UnattendedRepairArgs(
                stack=cfg,
                stack_name=stack_name,
                proxmox_credential=pulumi.Output.secret(STACK_TOKEN),
                proxmox_provider=proxmoxve.Provider("proxmox", endpoint="https://pve.example:8006/"),
                kubernetes_provider=kubernetes.Provider("kubernetes"),
                pool_facts=pool_facts_document(cfg, stack_name),
                rule_labels=prometheus_rule_labels(cfg.monitoring),
            ),
        )

    execute(program)
    return monitor.recording
