"""Day-2 waves: which domains have a disruptive change to roll, in which order, and the commands a wave runs.

A domain's *rollout state* is what its GPU worker was last rolled to: the RKE2 release, the kernel pin, the VM's
cold-start settings and mapped card, the driver and the sharing profile's content. The wave's last step writes
it on the Node (annotation ROLLOUT_ANNOTATION), so the next `pulumi preview` knows, from the cluster, which
domains still have a change to roll: a domain whose Node carries another state is *pending*. A failed wave
leaves the failed domain and those after it pending, and the next `up` resumes there.

Only pending domains wait for each other (the graph edges are added where there is something to disrupt), so a
first install, where no Node exists yet, stays parallel.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from components.gpu_failure_domain.cloud_init import RKE2_INSTALL_URL
from components.gpu_failure_domain.node_steps import mapped_device
from components.gpu_failure_domain.proxmox_vm import reboot_settings
from config.failure_domain import FailureDomainConfig
from config.stack import StackConfig
from knowledge.gpu_operator import DEVICE_PLUGIN_APP, OPERAND_APP_LABEL

ROLLOUT_ANNOTATION = "gpu-pool.dev/rollout"
# Set by the wave's drain when it cordoned the node, so the wave's end uncordons only what the wave cordoned
# (a node an operator cordoned by hand stays cordoned).
WAVE_CORDON_ANNOTATION = "gpu-pool.dev/wave-cordoned"

# What each rollout component's change does to a worker, in the words `make diff` uses.
CHANGE_WORDS: Mapping[str, str] = {
    "rke2": "RKE2 agent upgrade",
    "kernel": "kernel upgrade and reboot",
    "vm": "VM power cycle (cold-start settings or card)",
    "driver": "driver upgrade gate",
    "sharing": "device plugin restart (sharing profile)",
}


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def rollout_state(domain: FailureDomainConfig, stack: StackConfig) -> dict[str, str]:
    """What a domain's worker is rolled to once its wave step is done (stable JSON: it is written on the Node)."""
    return {
        "rke2": stack.rke2.version,
        "kernel": domain.kernel or "",
        "vm": _digest([reboot_settings(domain), mapped_device(domain)]),
        "driver": stack.gpu_operator.driver_version,
        "sharing": f"{domain.sharing}@{_digest(stack.sharing_profiles[domain.sharing].model_dump(mode='json'))}",
    }


@dataclass(frozen=True)
class DeployedNode:
    """What the cluster says about a domain's Node (or, offline, what the earlier stack file rolled it to)."""

    rollout: Mapping[str, str] | None = None
    kubelet_version: str | None = None


def pending_changes(desired: Mapping[str, str], deployed: DeployedNode | None) -> list[str]:
    """The rollout components that differ. No Node: a first install, nothing to roll. The RKE2 release is what
    the kubelet reports where it reports one (a worker upgraded by hand is not upgraded again); the rest is what
    the Node's annotation records, and a Node from before waves (none) rolls only what it shows."""
    if deployed is None:
        return []
    recorded = deployed.rollout or {}
    running = deployed.kubelet_version or recorded.get("rke2")
    changed = ["rke2"] if running and running != desired["rke2"] else []
    if deployed.rollout is not None:
        changed += [key for key in desired if key != "rke2" and recorded.get(key) != desired[key]]
    return changed


def wave_order(stack: StackConfig) -> list[str]:
    """rollout.order first, then the remaining domains in failureDomains order."""
    listed = list(stack.rollout.order or [])
    return listed + [d.name for d in stack.failure_domains if d.name not in listed]


@dataclass
class WavePlan:
    """The pending domains in batches of rollout.maxUnavailable; batch i starts when batch i-1 is done."""

    batches: list[list[str]] = field(default_factory=list)
    changes: dict[str, list[str]] = field(default_factory=dict)

    def previous(self, domain: str) -> list[str]:
        for index, batch in enumerate(self.batches):
            if domain in batch:
                return self.batches[index - 1] if index else []
        return []

    def is_pending(self, domain: str) -> bool:
        return bool(self.changes.get(domain))


def plan_waves(stack: StackConfig, deployed: Mapping[str, DeployedNode | None]) -> WavePlan:
    by_name = {d.name: d for d in stack.failure_domains}
    changes = {
        name: pending_changes(rollout_state(by_name[name], stack), deployed.get(name)) for name in wave_order(stack)
    }
    pending = [name for name in wave_order(stack) if changes[name]]
    size = stack.rollout.max_unavailable
    return WavePlan(
        batches=[pending[i : i + size] for i in range(0, len(pending), size)],
        changes={name: found for name, found in changes.items() if found},
    )


# ---------------------------------------------------------------------------------------------- wave commands


def _annotation_path(key: str) -> str:
    return "{.metadata.annotations." + key.replace(".", "\\.") + "}"


def wave_drain_command(node: str, kubectl: str, domain: str) -> str:
    """Cordon (marking the node as cordoned by the wave, unless someone cordoned it before) and drain."""
    quoted = shlex.quote(node)
    mark = shlex.quote(f"{WAVE_CORDON_ANNOTATION}={domain}")
    return (
        f"set -e; if [ \"$({kubectl} get node {quoted} -o jsonpath='{{.spec.unschedulable}}')\" != true ]; then "
        f"{kubectl} annotate node {quoted} --overwrite {mark} >/dev/null; fi; "
        f"{kubectl} cordon {quoted}; "
        f"{kubectl} drain {quoted} --ignore-daemonsets --delete-emptydir-data --timeout=15m"
    )


def rollout_done_command(node: str, kubectl: str, state: Mapping[str, str]) -> str:
    """The wave's last step on a domain: uncordon what the wave cordoned, then record the state rolled to."""
    quoted = shlex.quote(node)
    path = shlex.quote(_annotation_path(WAVE_CORDON_ANNOTATION))
    value = shlex.quote(f"{ROLLOUT_ANNOTATION}={json.dumps(dict(state), sort_keys=True, separators=(',', ':'))}")
    return (
        f'set -e; if [ -n "$({kubectl} get node {quoted} -o jsonpath={path})" ]; then '
        f"{kubectl} uncordon {quoted}; {kubectl} annotate node {quoted} {WAVE_CORDON_ANNOTATION}- >/dev/null; fi; "
        f"{kubectl} annotate node {quoted} --overwrite {value} >/dev/null; "
        f"echo {shlex.quote(f'{node}: rolled out, serving')}"
    )


def device_plugin_restart_command(node: str, kubectl: str, namespace: str) -> str:
    """The plugin reads its config only at start or on SIGHUP, and its config-manager reacts to a changed node
    label only (k8s-device-plugin v0.19.2 cmd/config-manager/main.go:273-280, cmd/nvidia-device-plugin/main.go
    :253-315; NVIDIA gpu-sharing.rst: "The Operator does not monitor the time-slicing config maps"): a profile
    edited in place reaches the node only when its plugin pod is recreated."""
    return (
        f"{kubectl} -n {shlex.quote(namespace)} delete pod -l {OPERAND_APP_LABEL}={DEVICE_PLUGIN_APP} "
        f"--field-selector spec.nodeName={shlex.quote(node)} --wait=true --timeout=5m"
    )


def rke2_upgrade_command(version: str) -> str:
    """Runs on the VM over SSH: the official installer at the pinned release, as the first-boot join does
    (INSTALL_RKE2_VERSION, https://docs.rke2.io/upgrades/manual_upgrade), then the agent restarted on it."""
    pinned = shlex.quote(version)
    # Downloaded first, not piped: in a pipe `set -e` only sees the shell's exit, never curl's (as cloud_init.py).
    return (
        "set -e; "
        f"curl -sfL {RKE2_INSTALL_URL} -o /tmp/install-rke2.sh; "
        f"sudo INSTALL_RKE2_TYPE=agent INSTALL_RKE2_VERSION={pinned} sh /tmp/install-rke2.sh; "
        "sudo systemctl restart rke2-agent; "
        f"echo {shlex.quote(f'rke2-agent restarted on {version}')}"
    )


def node_cleanup_command(node: str, kubectl: str) -> str:
    """A removed domain's Node object outlives its VM (nothing deregisters it): deleted after the VM."""
    return f"{kubectl} delete node {shlex.quote(node)} --ignore-not-found --wait=false"
