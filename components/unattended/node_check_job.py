"""The in-cluster node-check: a Job pinned to one node that runs node-check from the stack's code zip in the stock
image, so the watcher reads a node's own floors without SSH (issue 41 item 3). A pure builder: the watcher creates
one per check (before a repair and after the power cycle) with the node's flags.

What the Job can see and do, and why each is needed (node-check reads: day2/node_check/facts.py):
- The container's own /sys and /proc: PCI devices (/sys/bus/pci/devices), the nvidia module's version
  (/sys/module/nvidia/version, /proc/driver/nvidia/version) and the boot id (/proc/sys/kernel/random/boot_id) are
  the kernel's, not a namespace's, so no host mount is needed for them; /sys is read-only in a container.
- Host mounts, read-only, nothing else: /run/nvidia (a containerised driver's root: node-check tells it from a host
  install) and /etc/machine-id (which machine the report is from).
- The kernel log for Xid events: `dmesg` reads it with syslog(2), which needs CAP_SYSLOG where
  kernel.dmesg_restrict is 1 (Ubuntu's default). So the container runs as root with every capability dropped but
  SYSLOG, no privilege escalation, a read-only root filesystem; that capability and the host mounts are why its
  namespace is labelled for the privileged Pod Security level (baseline refuses hostPath and SYSLOG).
- No service account token, no network use, no NVML (the stock image has no NVML library: the nvml floor reads
  "skipped", and the other floors decide).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.shared.payload import pack
from config.failure_domain import FailureDomainConfig
from config.repair import UnattendedConfig
from config.stack import StackConfig
from knowledge.kubernetes import pod_security_labels

NAME = "gpu-pool-node-check"
# node-check's entry, named, not imported (the program ships it): the same zip `gpu-pool repair` sends over SSH
# (day2/bundle.py node_check_zip; a test keeps the two equal).
NODE_CHECK_ENTRY = "day2.node_check.command"
CODE_CONFIGMAP = "gpu-pool-node-check-code"
CODE_KEY = "node-check.pyz"
CODE_MOUNT = "/opt/gpu-pool"
HOST_ETC = "/host/etc"
# The host paths node-check reads that a container does not see by itself: (host path, mount path, type).
HOST_MOUNTS: tuple[tuple[str, str, str], ...] = (
    ("/run/nvidia", "/run/nvidia", "DirectoryOrCreate"),
    ("/etc/machine-id", f"{HOST_ETC}/machine-id", "File"),
)
# A check reads files and runs dmesg once: seconds. One that hangs is cut short before the watcher gives up.
DEADLINE_SECONDS = 300


def node_check_flags(stack: StackConfig, domain: FailureDomainConfig) -> list[str]:
    """What the stack expects of the node, as node-check's flags: the same as `gpu-pool repair` gives node-check
    over SSH (day2/node_stack.py as_flags, a test keeps the two equal)."""
    flags: list[str] = []
    for card in domain.cards:
        flags += ["--expect-id", card.vendor_device_id]
    for card in domain.cards:
        flags += ["--expect-subsystem", card.subsystem_id]
    if stack.gpu_operator.driver_version:
        flags += ["--expect-driver", stack.gpu_operator.driver_version]
    flags += ["--proxmox-node", domain.proxmox_node, "--vm-id", str(domain.vm_id)]
    return flags


def node_check_zip() -> bytes:
    return pack(NODE_CHECK_ENTRY, also=["day2.node_check.__main__"])


def labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpu-pool"}


def node_check_namespace(cfg: UnattendedConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": cfg.node_check_namespace, "labels": {**labels(), **pod_security_labels("privileged")}},
    }


def node_check_code(cfg: UnattendedConfig, code: bytes) -> dict[str, Any]:
    import base64

    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CODE_CONFIGMAP, "namespace": cfg.node_check_namespace, "labels": labels()},
        "binaryData": {CODE_KEY: base64.b64encode(code).decode()},
    }


def node_check_job(cfg: UnattendedConfig, node: str, flags: Sequence[str], name: str) -> dict[str, Any]:
    """The Job that runs `node-check <flags> -o json --node <node>` on `node` and nowhere else."""
    volumes: list[dict[str, Any]] = [{"name": "code", "configMap": {"name": CODE_CONFIGMAP}}]
    mounts: list[dict[str, Any]] = [{"name": "code", "mountPath": CODE_MOUNT, "readOnly": True}]
    for index, (host, path, kind) in enumerate(HOST_MOUNTS):
        volumes.append({"name": f"host-{index}", "hostPath": {"path": host, "type": kind}})
        mounts.append({"name": f"host-{index}", "mountPath": path, "readOnly": True})
    command = [
        "python3",
        f"{CODE_MOUNT}/{CODE_KEY}",
        *flags,
        "--etc-root",
        HOST_ETC,
        "--node",
        node,
        "-o",
        "json",
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": cfg.node_check_namespace, "labels": labels()},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": DEADLINE_SECONDS,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    # Pinned by name, past the scheduler: the node is cordoned (or NotReady) when it is checked.
                    "nodeName": node,
                    "tolerations": [{"operator": "Exists"}],
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "containers": [
                        {
                            "name": "node-check",
                            "image": cfg.image,
                            "command": command,
                            "volumeMounts": mounts,
                            "securityContext": {
                                "runAsUser": 0,
                                "runAsNonRoot": False,
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"], "add": ["SYSLOG"]},
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }
