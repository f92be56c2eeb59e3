"""The thirteen traps, numbered and titled as in the traps table of the docs (the article's wording).

One place for the titles `doctor` names in its fix; tests/day2/test_traps.py checks them against the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

TRAPS: Mapping[int, str] = MappingProxyType(
    {
        1: "The driver gets OOM-killed, exit 137",
        2: "failed to install nvidia kernel module: distro 'ubuntu24.04' not supported",
        3: "nvidia: Unknown symbol __register_chrdev after a host kernel upgrade",
        4: "Missing kernel headers",
        5: "nvidia-validator: command not found, exit 127",
        6: 'no runtime for "nvidia" is configured',
        7: "Failed to initialize NVML: Driver/library version mismatch",
        8: "KubeArmor's AppArmor profile blocks the toolkit",
        9: "The toolkit writes the CDI spec and containerd never reads it",
        10: "Missing runtimeClassName: nvidia on a cluster where nvidia isn't the default runtime",
        11: "Insufficient nvidia.com/gpu while three healthy GPUs sit idle",
        12: "NFD takes a minute on first install",
        13: "The DCGM exporter gets OOM-killed right after logging DCGM successfully initialized!",
    }
)

# Named by the layer they sit on, so the floors read like the article's sections.
DRIVER_OOM = 1
DISTRO_NOT_SUPPORTED = 2
UNKNOWN_SYMBOL = 3
MISSING_HEADERS = 4
VALIDATOR_127 = 5
NO_RUNTIME = 6
NVML_MISMATCH = 7
KUBEARMOR = 8
CDI_UNREAD = 9
MISSING_RUNTIME_CLASS = 10
INSUFFICIENT_GPU = 11
NFD_FIRST_SCAN = 12
DCGM_OOM = 13


def trap(number: int) -> str:
    """`trap 1: The driver gets OOM-killed, exit 137`."""
    return f"trap {number}: {TRAPS[number]}"


# Rows of the table's "The article's other traps" that a floor can meet, by their first column (without its
# backticks). They have no number, so they are named `other trap: <title>`.
TIME_SLICING_ORDER = (
    "Time-slicing: create the ConfigMap before patching the ClusterPolicy (a card went from 1 to 0 schedulable GPUs)"
)
GPU_TAINT = "The GPU taint (Node.spec.taints is an atomic list)"
OTHER_TRAPS: tuple[str, ...] = (TIME_SLICING_ORDER, GPU_TAINT)


def other_trap(title: str) -> str:
    assert title in OTHER_TRAPS, title
    return f"other trap: {title}"
