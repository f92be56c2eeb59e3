"""Reading the device plugin's time-slicing ConfigMap: which profiles exist and how many slots each gives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from day2 import objects as o
from knowledge.gpu_operator import GPU_RESOURCE


def find_configmap(snapshot: o.Snapshot, namespace: str, name: str) -> Mapping[str, Any] | None:
    return next((c for c in snapshot.configmaps if o.namespace(c) == namespace and o.name(c) == name), None)


def profiles(configmap: Mapping[str, Any]) -> dict[str, str]:
    """Profile name -> the device-plugin config document under that data key."""
    data = configmap.get("data")
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {}


def profile_slots(document: str) -> int | None:
    """Schedulable `nvidia.com/gpu` one card advertises under this device-plugin config (None: unreadable).

    No `sharing` block means the whole card (1); time-slicing gives `replicas` per card for nvidia.com/gpu.
    """
    try:
        parsed = yaml.safe_load(document)
    except yaml.YAMLError:
        return None
    if not isinstance(parsed, Mapping) or parsed.get("version") != "v1":
        return None
    sharing = parsed.get("sharing")
    if not isinstance(sharing, Mapping):
        return 1
    for strategy in ("timeSlicing", "mps"):
        block = sharing.get(strategy)
        if not isinstance(block, Mapping):
            continue
        for resource in block.get("resources") or []:
            if isinstance(resource, Mapping) and resource.get("name") == GPU_RESOURCE:
                replicas = resource.get("replicas")
                return replicas if isinstance(replicas, int) and replicas >= 1 else None
    return 1
