"""Reading the device plugin's time-slicing ConfigMap: which profiles exist, what each gives, and what GPU Feature
Discovery labels a node with under it.

A profile is read as NVIDIA's k8s-device-plugin reads it (v0.19.3 `api/config/v1`, the same package GFD loads it
with): the active block is `sharing.mps` when there is one, else `sharing.timeSlicing`; a block needs resources,
and a resource entry at least 2 replicas, or the plugin refuses the whole file (and the node advertises 0);
`renameByDefault` moves the shared cards to `nvidia.com/gpu.shared`. This reading is checked against the plugin's
own loader and against what GFD and the plugin did on an H200, for every profile the program renders and for
shapes it must not (tests/day2/test_gfd_labels.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from day2 import objects as o
from knowledge.gpu_operator import (
    GPU_PRODUCT_LABEL,
    GPU_REPLICAS_LABEL,
    GPU_RESOURCE,
    GPU_SHARING_STRATEGY_LABEL,
    SHARED_PRODUCT_SUFFIX,
)

CONFIG_VERSION = "v1"
STRATEGY_NONE = "none"
# The plugin's names for the two sharing blocks (Sharing.SharingStrategy()).
STRATEGIES = {"mps": "mps", "timeSlicing": "time-slicing"}


def find_configmap(snapshot: o.Snapshot, namespace: str, name: str) -> Mapping[str, Any] | None:
    return next((c for c in snapshot.configmaps if o.namespace(c) == namespace and o.name(c) == name), None)


def profiles(configmap: Mapping[str, Any]) -> dict[str, str]:
    """Profile name -> the device-plugin config document under that data key."""
    data = configmap.get("data")
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {}


@dataclass(frozen=True)
class ProfileReading:
    """What the device plugin and GFD make of one profile document, for `nvidia.com/gpu`."""

    # Devices advertised per card (1: not replicated).
    replicas: int
    # none | time-slicing | mps: the strategy of the replicated block, as GFD labels it.
    strategy: str
    # Shared cards advertised as nvidia.com/gpu.shared instead of nvidia.com/gpu (renameByDefault).
    renamed: bool

    @property
    def slots(self) -> int:
        """Schedulable `nvidia.com/gpu` per card: none at all when the cards are renamed."""
        return 0 if self.renamed else self.replicas

    def gfd_labels(self) -> dict[str, str]:
        """The sharing labels GFD writes under this profile (the product's model part is the card's own)."""
        shared = self.replicas > 1
        return {
            GPU_REPLICAS_LABEL: str(self.replicas),
            GPU_SHARING_STRATEGY_LABEL: self.strategy if shared else STRATEGY_NONE,
        }

    @property
    def shared_product(self) -> bool:
        """Whether GFD appends -SHARED to nvidia.com/gpu.product: shared under the plain name."""
        return self.replicas > 1 and not self.renamed


class _Refused(ValueError):
    """The plugin refuses the whole file (it then exits, and the node advertises 0)."""


def _gpu_entry(block: Any) -> Mapping[str, Any] | None:
    """A sharing block's nvidia.com/gpu entry (None: the block shares other resources only)."""
    resources = block.get("resources") if isinstance(block, Mapping) else None
    if not isinstance(resources, list) or not resources:
        raise _Refused("no resources specified")
    for resource in resources:
        replicas = resource.get("replicas") if isinstance(resource, Mapping) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 2:
            raise _Refused("number of replicas must be >= 2")
    return next((r for r in resources if r.get("name") == GPU_RESOURCE), None)


def read_profile(document: str) -> ProfileReading | None:
    """The plugin's reading of one profile document; None when the plugin refuses it."""
    try:
        parsed = yaml.safe_load(document)
    except yaml.YAMLError:
        return None
    if not isinstance(parsed, Mapping) or parsed.get("version", CONFIG_VERSION) != CONFIG_VERSION:
        return None
    sharing = parsed.get("sharing") or {}
    if not isinstance(sharing, Mapping):
        return None
    blocks = {key: sharing[key] for key in STRATEGIES if sharing.get(key) is not None}
    try:
        entries = {key: _gpu_entry(block) for key, block in blocks.items()}
    except _Refused:
        return None
    active = "mps" if "mps" in blocks else "timeSlicing"
    entry = entries.get(active)
    if entry is None:
        return ProfileReading(replicas=1, strategy=STRATEGY_NONE, renamed=False)
    renamed = blocks[active].get("renameByDefault") is True
    return ProfileReading(replicas=int(entry["replicas"]), strategy=STRATEGIES[active], renamed=renamed)


def profile_slots(document: str) -> int | None:
    """Schedulable `nvidia.com/gpu` one card advertises under this device-plugin config (None: refused)."""
    reading = read_profile(document)
    return reading.slots if reading is not None else None


def stale_gfd_labels(node_labels: Mapping[str, str], reading: ProfileReading) -> list[str]:
    """GFD's sharing labels on the node that the profile would not give, each as `label=value (profile: ...)`.

    Only labels GFD has written count: a node it has not labelled yet is not stale."""
    stale = [
        f"{key}={node_labels[key]} (the profile gives {wanted})"
        for key, wanted in reading.gfd_labels().items()
        if key in node_labels and node_labels[key] != wanted
    ]
    product = node_labels.get(GPU_PRODUCT_LABEL)
    if product is not None and product.endswith(SHARED_PRODUCT_SUFFIX) != reading.shared_product:
        says = "a shared card's, with" if reading.shared_product else "not shared, so without"
        stale.append(f"{GPU_PRODUCT_LABEL}={product} (the profile's card is {says} {SHARED_PRODUCT_SUFFIX})")
    return stale
