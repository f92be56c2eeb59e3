"""The per-domain CUDA smoke test Job: driver, runtime, device plugin, scheduler and the Kyverno mutation at once."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from config.failure_domain import FailureDomainConfig
from config.smoke_test import SmokeTestConfig
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


def smoke_device(domain: FailureDomainConfig) -> str:
    """Every card the node's slots come from; one card reads as before (`10de:25b0@pve1/0000:01:00`), so its Job
    keeps its name. The gpu-ready gate before the Job waits for the slots of every card, on the pinned driver."""
    return ",".join(f"{card.vendor_device_id}@{domain.proxmox_node}/{card.pci_address}" for card in domain.cards)


def smoke_job_name(domain: str, validated: dict[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(validated, sort_keys=True).encode()).hexdigest()[:10]
    return f"cuda-smoke-{domain}-{digest}"


def build_smoke_job(
    domain: str, cfg: SmokeTestConfig, validated: dict[str, str], *, toleration: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Job pinned to the domain's node that asks for one GPU and nothing else GPU-related.

    With the Kyverno policy on, no GPU toleration on purpose (`toleration=None`): the policy must add
    it, so a passing Job also proves the mutation. Without the policy the Job carries it itself.
    """
    tolerations = [dict(UNSCHEDULABLE_TOLERATION)] + ([dict(toleration)] if toleration else [])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": smoke_job_name(domain, validated),
            "namespace": cfg.namespace,
            "labels": {"app.kubernetes.io/name": "cuda-smoke-test", "gpu-pool/domain": domain},
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
                "metadata": {"labels": {"app.kubernetes.io/name": "cuda-smoke-test", "gpu-pool/domain": domain}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {HOSTNAME_LABEL: validated["node"]},
                    "tolerations": tolerations,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "cuda-vectoradd",
                            "image": cfg.image,
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "resources": {"limits": {GPU_RESOURCE: "1"}},
                        }
                    ],
                },
            },
        },
    }
