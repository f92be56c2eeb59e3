"""The labels and taint that mark a GPU worker, and the kubectl commands that wait for and taint its node."""

from __future__ import annotations

import shlex

from components.shared.node_marking import ARTICLE_MARKING, GpuNodeMarking
from config.failure_domain import FailureDomainConfig
from knowledge.gpu_operator import DEVICE_PLUGIN_CONFIG_LABEL
from knowledge.kubernetes import ZONE_LABEL


def registration_labels(domain: FailureDomainConfig, marking: GpuNodeMarking = ARTICLE_MARKING) -> dict[str, str]:
    """Labels RKE2 sets when the node registers: ones that never change over the node's life.

    RKE2's agent patches its `node-label` values onto the node at every start (k3s pkg/agent/run.go,
    configureNode -> updateMutableLabels), and cloud-init's config.yaml is written once. A label that can
    change on day 2 (the sharing profile) must not be there, or the next reboot quietly puts the old value back.
    """
    return {marking.label_key: marking.label_value, ZONE_LABEL: domain.name}


def node_labels(domain: FailureDomainConfig, marking: GpuNodeMarking = ARTICLE_MARKING) -> dict[str, str]:
    """Every label the stack keeps on the node: the registration labels and the domain's sharing profile."""
    return {**registration_labels(domain, marking), DEVICE_PLUGIN_CONFIG_LABEL: domain.sharing}


def taint_command(node: str, kubectl: str, marking: GpuNodeMarking = ARTICLE_MARKING) -> str:
    # `kubectl taint --overwrite` merges one taint by key. Server-side apply of spec.taints would
    # replace the whole atomic list and wipe taints other controllers own (cordon, unreachable).
    return f"{kubectl} taint node {shlex.quote(node)} {shlex.quote(marking.taint)} --overwrite"


def untaint_command(node: str, kubectl: str, marking: GpuNodeMarking = ARTICLE_MARKING) -> str:
    # The node may already be gone when its domain is destroyed: removing its taint is then moot.
    return f"{kubectl} taint node {shlex.quote(node)} {shlex.quote(marking.taint_key + '-')} || true"


def ssh_host(domain: FailureDomainConfig) -> str:
    """Where SSH reaches the domain's VM: its static address, else its hostname (DHCP: the name must resolve)."""
    return domain.network.ipv4.split("/")[0] if domain.network.ipv4 != "dhcp" else domain.hostname
