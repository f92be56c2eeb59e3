"""The steps gpu-pool runs against one GPU worker (node_steps_script.py), as pulumi-command inputs.

The script and node/ travel as one zip (components/shared/payload.py, as node-check, the health check and the
watcher do) inside a small bootstrap that `python3 -c` runs: it writes the zip to a private temporary file, runs
it and removes it. The zip's bytes depend on the sources alone, so the command changes only when the code does.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from components.gpu_failure_domain.proxmox_vm import mapped_indexes, pci_mapping_args, reboot_settings
from components.gpu_failure_domain.steps import ScriptStep
from components.shared.payload import pack
from config.failure_domain import FailureDomainConfig
from config.proxmox import ProxmoxConfig
from config.rollout import DRAIN_TIMEOUT_SECONDS
from config.stack import StackConfig

ENTRY = "components.gpu_failure_domain.node_steps_script"
INTERPRETER = ["python3", "-c"]
# How long a turn's last step may take (one patch).
ROLLOUT_MINUTES = 5
# `python3 -c` of this: the zip from its base64 into a file only this user reads, run as `python3 app.pyz` would
# run it (its exit status kept), then removed whatever happened.
BOOTSTRAP = """import base64, os, runpy, sys, tempfile
fd, path = tempfile.mkstemp(prefix="gpu-pool-node-steps-", suffix=".pyz")
try:
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode("{encoded}"))
    sys.argv = [path]
    runpy.run_path(path, run_name="__main__")
finally:
    os.unlink(path)
"""


def node_steps_zip() -> bytes:
    return pack(ENTRY)


@functools.cache
def node_steps_script() -> str:
    """The command text (the bootstrap with the packed script), the same wherever the checkout is."""
    return BOOTSTRAP.replace("{encoded}", base64.b64encode(node_steps_zip()).decode())


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def step_environment(
    step: ScriptStep, node: str, kubectl: list[str], timeout_minutes: int, **extra: str
) -> dict[str, str]:
    """The environment of a step the node-steps script runs: `step` picks which (GPU_POOL_STEP)."""
    return {
        "GPU_POOL_STEP": step.value,
        "NODE_NAME": node,
        "KUBECTL": json.dumps(kubectl),
        "TIMEOUT_MINUTES": str(timeout_minutes),
        **extra,
    }


def gpu_ready_environment(
    domain: FailureDomainConfig, stack: StackConfig, kubectl: list[str], **extra: str
) -> dict[str, str]:
    """The gpu-ready gate's environment: the node advertises its slots on the pinned driver (the smoke test's gate
    and the wave's gate both wait on it)."""
    return step_environment(
        ScriptStep.GPU_READY,
        domain.hostname,
        kubectl,
        stack.smoke_test.gpu_ready_timeout_minutes,
        GPU_SLOTS=str(stack.slots(domain)),
        DRIVER_VERSION=stack.gpu_operator.driver_version,
        OPERATOR_NAMESPACE=stack.gpu_operator.namespace,
        **extra,
    )


def mapped_device(domain: FailureDomainConfig) -> str:
    """The devices behind the VM's mapped hostpci entries: the VM config only names a mapping, so they are tracked
    here. One card gives exactly the one-card value, so a stack that keeps one card sees no change."""
    maps = [entry for index in mapped_indexes(domain) for entry in pci_mapping_args(domain, index)["maps"]]
    return json.dumps(maps, sort_keys=True)


def power_cycle_environment(
    domain: FailureDomainConfig,
    proxmox: ProxmoxConfig,
    kubectl: list[str],
    timeout_minutes: int,
    *,
    forced: str | None = None,
) -> dict[str, str]:
    """Non-secret environment of the power-cycle step; the component adds the credential as a secret.

    VM_SETTINGS changes with every VM setting Proxmox only applies at a cold start, so a change to one of them
    runs the step (an update, which checks what is really pending); MAPPED_DEVICE is compared with what the
    previous run applied. `forced` (a repair's reason) cycles the VM whatever is pending.
    """
    extra = {"POWER_CYCLE_REASON": forced} if forced else {}
    return step_environment(
        ScriptStep.POWER_CYCLE,
        domain.hostname,
        kubectl,
        timeout_minutes,
        PROXMOX_ENDPOINT=proxmox.endpoint,
        PROXMOX_NODE=domain.proxmox_node,
        PROXMOX_VMID=str(domain.vm_id),
        PROXMOX_INSECURE="true" if proxmox.insecure else "false",
        MAPPED_DEVICE=mapped_device(domain),
        VM_SETTINGS=_digest(reboot_settings(domain)),
        **extra,
    )


def drain_environment(
    domain: FailureDomainConfig, kubectl: list[str], holder: str, operator_namespace: str
) -> dict[str, str]:
    """A turn's start (the hold, the operator held off, the cordon, the drain): who holds the node, the mark its
    cordon and operator hold carry (the domain's name), and where the driver pods are (the revision it starts on)."""
    return step_environment(
        ScriptStep.DRAIN,
        domain.hostname,
        kubectl,
        DRAIN_TIMEOUT_SECONDS // 60,
        TURN_HOLDER=holder,
        TURN_DOMAIN=domain.name,
        OPERATOR_NAMESPACE=operator_namespace,
    )


def rollout_environment(
    domain: FailureDomainConfig, kubectl: list[str], state: Mapping[str, str], **extra: str
) -> dict[str, str]:
    """A wave turn's end: the state rolled to, recorded on the Node (stable JSON)."""
    return step_environment(
        ScriptStep.ROLLOUT,
        domain.hostname,
        kubectl,
        ROLLOUT_MINUTES,
        ROLLOUT_STATE=json.dumps(dict(state), sort_keys=True, separators=(",", ":")),
        **extra,
    )
