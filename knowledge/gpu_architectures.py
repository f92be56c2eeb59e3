"""Which NVIDIA GPU generation a PCI device id belongs to, and which drivers and kernel modules can drive it.

Only the boundaries the stack needs are kept: whether the open kernel modules can drive a card (Turing or newer)
and which driver branches still support it. NVIDIA numbers its PCI device ids by chip, and the chips of one
generation sit in one block below the next generation's, so two boundaries answer both questions:

- Turing or newer from 0x1E00. The open modules' list of compatible GPUs ("Compatible GPUs" in
  NVIDIA/open-gpu-kernel-modules README.md, e.g. commit 015742d32fa615353199b11589ecaba828040859, release
  550.40.82) says "any Turing or later GPU" and its lowest device id is 1E02 (TITAN RTX, TU102); the Volta
  GV100 parts (V100 0x1DB1-0x1DBA, V100S 0x1DF6) and the last Pascal (GP108, 0x1D01-0x1D52) are below it.
- Maxwell from 0x1340 (GM108, GeForce 830M), right above the last Kepler chip (GK208, 0x1280-0x12BA); the
  driver README's Appendix A ("Supported NVIDIA GPU Products", the 470 legacy list for Kepler) has the same split.

Support per generation:
- Open kernel modules: "only for Turing and newer architectures"; the proprietary flavour "is required for older
  GPUs from the Maxwell, Pascal, or Volta architectures" (NVIDIA Driver Installation Guide, "Kernel Modules",
  docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html).
- "The release 580 series will be the last to support GPUs based on the Maxwell, Pascal, and Volta
  architectures"; Kepler's last was the 470 legacy branch (NVIDIA, "Unix Graphics Feature Deprecation Schedule",
  forums.developer.nvidia.com/t/unix-graphics-feature-deprecation-schedule/60588).
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Generation(NamedTuple):
    name: str
    # The first PCI device id of the block (NVIDIA vendor id 10de).
    first_device_id: int
    # The newest driver branch that supports it; None while NVIDIA still supports it in new branches.
    last_branch: int | None
    # Whether the open kernel modules (the GSP-based flavour) can drive it.
    open_modules: bool


# Oldest first; a device id belongs to the last generation whose first id it reaches.
GENERATIONS: Final[tuple[Generation, ...]] = (
    Generation("Kepler or older", 0x0000, 470, False),
    Generation("Maxwell, Pascal or Volta", 0x1340, 580, False),
    Generation("Turing or newer", 0x1E00, None, True),
)
OPEN_MODULES_FROM: Final = "Turing"


def generation(vendor_device_id: str) -> Generation:
    """The generation of a card given as `10de:xxxx` (the stack file's vendorDeviceId)."""
    device = int(vendor_device_id.split(":")[1], 16)
    return [g for g in GENERATIONS if device >= g.first_device_id][-1]
