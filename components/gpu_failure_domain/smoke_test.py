"""The per-domain CUDA smoke test Job: driver, runtime, device plugin, scheduler and the Kyverno mutation at once."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from config.failure_domain import FailureDomainConfig
from config.smoke_test import SMOKE_APP_LABEL, SmokeTestConfig
from knowledge.gpu_operator import GPU_RESOURCE
from knowledge.kubernetes import HOSTNAME_LABEL, UNSCHEDULABLE_TAINT_KEY

# Lets the Job run on its node while a kernel upgrade keeps the node cordoned (NodeUnschedulable filter).
UNSCHEDULABLE_TOLERATION = {"key": UNSCHEDULABLE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def validated_stack(
    *, chart_version: str, driver_version: str, node: str, device: str, image: str, kernel: str | None
) -> dict[str, str]:
    """What the test proves. A change to any of these gives the Job a new name, so it runs again."""
    return {
        "chart": chart_version,
        "driver": driver_version,
        "node": node,
        "device": device,
        "image": image,
        "kernel": kernel or "as-booted",
    }


def smoke_device(domain: FailureDomainConfig, card: int = 0) -> str:
    """The card one Job tests (`10de:25b0@pve1/0000:01:00`): a domain with several cards has a Job per card, each
    naming only its own. The gpu-ready gate before the Jobs waits for the slots of every card, on the pinned
    driver."""
    gpu = domain.cards[card]
    return f"{gpu.vendor_device_id}@{domain.proxmox_node}/{gpu.pci_address}"


def smoke_job_name(domain: str, validated: dict[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(validated, sort_keys=True).encode()).hexdigest()[:10]
    return f"cuda-smoke-{domain}-{digest}"


def build_smoke_job(
    domain: str,
    cfg: SmokeTestConfig,
    validated: dict[str, str],
    *,
    toleration: dict[str, str] | None = None,
    card: int | None = None,
    gpus: int = 1,
) -> dict[str, Any]:
    """A Job pinned to the domain's node that runs the CUDA sample on one card and asks for nothing else GPU-related.

    One card (`card` None): the Job asks for one GPU. Several: the device plugin hands a one-GPU request any card
    (and on a time-sliced node possibly a slice of the card another Job tested), so each card's Job asks for every
    slot of the node (`gpus`), which makes every card visible, and CUDA picks card number `card` by PCI bus order
    (CUDA_DEVICE_ORDER, the order of the VM's hostpciN entries). With the Kyverno policy on, no GPU toleration on
    purpose (`toleration=None`): the policy must add it, so a passing Job also proves the mutation. Without the
    policy the Job carries it itself.
    """
    several = card is not None
    tolerations = [dict(UNSCHEDULABLE_TOLERATION)] + ([dict(toleration)] if toleration else [])
    container: dict[str, Any] = {
        "name": "cuda-vectoradd",
        "image": cfg.image,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {"limits": {GPU_RESOURCE: str(gpus)}},
    }
    if several:
        container["env"] = [
            {"name": "CUDA_DEVICE_ORDER", "value": "PCI_BUS_ID"},
            {"name": "CUDA_VISIBLE_DEVICES", "value": str(card)},
        ]
    labels = {SMOKE_APP_LABEL[0]: SMOKE_APP_LABEL[1], "gpu-pool/domain": domain}
    if several:
        labels["gpu-pool/card"] = str(card)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": smoke_job_name(domain, validated),
            "namespace": cfg.namespace,
            "labels": labels,
            "annotations": {
                # A failed test is replaced (re-run) on the next `pulumi up` instead of waited on again.
                "pulumi.com/replaceUnready": "true",
                **{f"gpu-pool/validated-{key}": value for key, value in validated.items()},
            },
        },
        "spec": {
            "backoffLimit": 1,
            "activeDeadlineSeconds": cfg.timeout_seconds,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {HOSTNAME_LABEL: validated["node"]},
                    "tolerations": tolerations,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                },
            },
        },
    }
