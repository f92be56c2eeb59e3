"""The device plugin's time-slicing ConfigMap: one named sharing profile per data key.

Each node picks its profile with the label `nvidia.com/device-plugin.config=<key>` (DESIGN.md
section 3, "Time-slicing, per node"). The program creates this ConfigMap before the operator
release and before any node label names a key, so the article's trap (ClusterPolicy pointed at a
ConfigMap that did not exist yet: one card went from 1 to 0 schedulable GPUs) cannot happen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import yaml

from config.sharing import SharingProfile
from config.validators import LABEL_VALUE
from knowledge.gpu_operator import GPU_RESOURCE

TIME_SLICING_CONFIGMAP: Final = "time-slicing-config"

# A profile name is both a ConfigMap data key and the value of the node label
# nvidia.com/device-plugin.config, so it must satisfy the stricter of the two: a label value.


def _profile_document(profile: SharingProfile) -> dict[str, Any]:
    # migStrategy none: the lab's A1000s have no MIG, and the operator's MIG manager is off.
    document: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": "none"}}
    if profile.replicas == 1:
        # Whole card: no sharing block at all, so the node advertises exactly one nvidia.com/gpu.
        return document
    document["sharing"] = {
        "timeSlicing": {
            # These two belong under sharing.timeSlicing; under `flags` the device plugin ignores
            # them without a word (k8s-device-plugin#1433).
            # renameByDefault false keeps the resource called nvidia.com/gpu (not nvidia.com/gpu.shared),
            # so workloads and the Kyverno policy that matches nvidia.com/gpu stay the same on every node.
            "renameByDefault": False,
            "failRequestsGreaterThanOne": False,
            "resources": [{"name": GPU_RESOURCE, "replicas": profile.replicas}],
        }
    }
    return document


def render_profile(profile: SharingProfile) -> str:
    """One profile as the YAML document the device plugin reads."""
    return yaml.safe_dump(_profile_document(profile), sort_keys=False, default_flow_style=False)


def build_time_slicing_config(profiles: Mapping[str, SharingProfile]) -> dict[str, str]:
    """The ConfigMap `data`: one key per sharing profile, sorted, each a device-plugin config document."""
    data: dict[str, str] = {}
    for name in sorted(profiles):
        if not name or not LABEL_VALUE.match(name):
            raise ValueError(
                f"sharing profile name '{name}' must be usable as a node label value: at most 63 "
                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            )
        data[name] = render_profile(profiles[name])
    return data


def build_time_slicing_configmap(profiles: Mapping[str, SharingProfile], namespace: str) -> dict[str, Any]:
    """The whole v1 ConfigMap, in the operator's namespace (the device plugin only reads it there)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": TIME_SLICING_CONFIGMAP, "namespace": namespace},
        "data": build_time_slicing_config(profiles),
    }
