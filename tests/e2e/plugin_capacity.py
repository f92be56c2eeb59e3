"""A GPU node's `nvidia.com/gpu` as NVIDIA's device plugin really advertises it, for the e2e cluster stand-in.

There is no kubelet or device plugin in the e2e tier, so the stand-in writes the Node's capacity itself; the number
comes from what the real plugin advertised on an H200 under the very document the node's profile names
(tests/fixtures/deviceplugin/h200, tests/plugin_recording.py), never from the profile's `replicas`. Per card: the
plugin replicates each physical device on its own, so a VM with several cards advertises the count per card times
its cards (k8s-device-plugin v0.19.3 internal/rm/device_map.go, updateDeviceMapWithReplicas).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from config.sharing import SharingProfile
from knowledge.gpu_operator import GPU_RESOURCE
from tests.plugin_recording import h200_documents, kubelet_report, program_documents, shape


class UnrecordedProfile(LookupError):
    """A profile document the device plugin was never run on: record it (docs/verification.md) before relying on it."""


@cache
def _recorded_by_document() -> dict[str, str]:
    return {document: name for name, document in h200_documents().items()}


def advertised_per_card(document: str) -> int:
    """`nvidia.com/gpu` the plugin advertised for one card under this profile document (0: under another name)."""
    name = _recorded_by_document().get(document)
    if name is None:
        raise UnrecordedProfile(f"no recorded device-plugin run for this time-slicing profile:\n{document}")
    report = kubelet_report(name)
    return report["deviceCount"] if report["register"]["resourceName"] == GPU_RESOURCE else 0


def advertised(configmap_data: Mapping[str, str], profile: str | None, cards: int) -> int:
    """What a node with `cards` cards advertises when its nvidia.com/device-plugin.config label names `profile`.

    A node without the label, or naming a key the ConfigMap lacks, is played as a plugin without a time-slicing
    config: the whole-card document's recording (the program's `replicas: 1` renders no sharing block at all)."""
    document = configmap_data.get(profile or "")
    if document is None:
        document = program_documents()[shape(SharingProfile(replicas=1))]
    return advertised_per_card(document) * cards
