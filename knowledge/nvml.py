"""NVML constants node-check interprets. Plain data (node-check runs on the node with the standard library).

Source: NVIDIA's nvml.h as shipped in nvidia-ml-py 13.580 (pynvml.py mirrors it) — the
`nvmlGpuVirtualizationMode_t` enum and the `nvmlClocksEventReason*` (formerly `nvmlClocksThrottleReason*`)
bit masks; NVML API reference, docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html.
"""

from __future__ import annotations

from types import MappingProxyType

# nvmlGpuVirtualizationMode_t
VIRTUALIZATION_MODES = MappingProxyType(
    {0: "none (bare metal)", 1: "pass-through", 2: "vGPU guest", 3: "vGPU host", 4: "vSGA host"}
)
# Modes in which the card is not a whole passed-through device: a vGPU guest needs the GRID driver, a host
# mode means this is the hypervisor, not the GPU worker.
NOT_WHOLE_CARD = frozenset({2, 3, 4})

# nvmlClocksEventReason* bits: the benign ones say why clocks are low without anything being wrong.
EVENT_REASONS = MappingProxyType(
    {
        0x1: "GPU idle",
        0x2: "applications clocks setting",
        0x4: "software power cap",
        0x8: "hardware slowdown",
        0x10: "sync boost",
        0x20: "software thermal slowdown",
        0x40: "hardware thermal slowdown",
        0x80: "hardware power brake slowdown",
        0x100: "display clock setting",
    }
)
# Hardware slowdowns: the card protects itself (temperature, power delivery); a workload runs slowly or not.
HARDWARE_SLOWDOWN = 0x8 | 0x40 | 0x80
