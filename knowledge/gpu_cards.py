"""The card capability table: what a PCI device id says about an NVIDIA card, read by the preview (config), by
`gpu-pool discover` and by `gpu-pool node-check`. One table, so the three never disagree.

Per device id (10de:xxxx): which chip and architecture it is, whether it is the GPU or one of the card's other
functions (its HDMI audio controller, USB, UCSI), which driver branches list it, whether the open or the
proprietary kernel modules drive it, whether it is MIG capable and, where measured, its BARs.

Sources:
- Device ids, chips and functions: the PCI ID Repository (github.com/pciutils/pciids, pci.ids; the names the
  Proxmox API and lspci show), generated into data/nvidia_cards.json (`functions`: ranges of consecutive ids with
  one chip and kind) by tests/contract/write_nvidia_cards.py, which names the commit.
- Chip to architecture: NVIDIA's chip codes (GK Kepler, GM Maxwell, GP Pascal, GV Volta, TU Turing, GA Ampere, GH
  Hopper, AD Ada Lovelace, GB Blackwell), as NVIDIA's MIG User Guide, "Supported GPUs" (docs.nvidia.com/
  datacenter/tesla/mig-user-guide/supported-gpus.html), pairs them: GA100 Ampere, GH100 Hopper, GB100/GB202/GB203
  Blackwell; and the architecture whitepapers (NVIDIA Turing GPU Architecture: TU102; NVIDIA Ada GPU
  Architecture: AD102; NVIDIA Tesla V100 GPU Architecture: GV100).
- Which drivers list a card: the "Compatible GPUs" table of NVIDIA/open-gpu-kernel-modules README.md at every
  release tag (`openModulesListed`: per device id, the first release of each branch that lists it;
  `openModulesNewest`: the newest release read per branch). NVIDIA adds a new GPU to both kernel-module flavours
  in the same release, so for a Turing or newer card this is the driver's own list.
- Kernel modules: the open modules drive "only Turing and newer architectures", the proprietary flavour "is
  required for older GPUs from the Maxwell, Pascal, or Volta architectures" (NVIDIA Driver Installation Guide,
  "Kernel Modules", docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html); "For
  cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the open-source GPU kernel
  modules. The proprietary drivers are unsupported on these platforms" (NVIDIA Technical Blog, "NVIDIA
  Transitions Fully Towards Open-Source GPU Kernel Modules", 2024-07-17).
- Last branches: "The release 580 series will be the last to support GPUs based on the Maxwell, Pascal, and Volta
  architectures"; Kepler's last was the 470 legacy branch (NVIDIA, "Unix Graphics Feature Deprecation Schedule",
  forums.developer.nvidia.com/t/unix-graphics-feature-deprecation-schedule/60588).
- MIG: the MIG User Guide's "Supported GPUs" table (above), matched to device ids by their pci.ids names.
- BARs: only what was measured; a card's BAR1 follows its memory and, on consumer cards, whether resizable BAR is
  on in the host firmware, so no size is guessed. The H200's is the lent machine's (tests/fixtures/node_check/
  h200: BAR0 16 MiB, BAR2 256 GiB, BAR4 32 MiB).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

DATA_FILE: Final = Path(__file__).resolve().parent / "data" / "nvidia_cards.json"

OpenModules = Literal["never", "optional", "only"]
Function = Literal["gpu", "audio", "usb", "ucsi", "nvswitch", "bridge", "unknown"]


class Architecture(NamedTuple):
    name: str
    # The chip code's prefix in pci.ids (GA107GL -> GA).
    chip_prefix: str
    # The newest driver branch that supports it; None while new branches still do.
    last_branch: int | None
    open_modules: OpenModules


ARCHITECTURES: Final[tuple[Architecture, ...]] = (
    Architecture("Kepler", "GK", 470, "never"),
    Architecture("Maxwell", "GM", 580, "never"),
    Architecture("Pascal", "GP", 580, "never"),
    Architecture("Volta", "GV", 580, "never"),
    Architecture("Turing", "TU", None, "optional"),
    Architecture("Ampere", "GA", None, "optional"),
    Architecture("Hopper", "GH", None, "optional"),
    Architecture("Ada Lovelace", "AD", None, "optional"),
    Architecture("Blackwell", "GB", None, "only"),
)
# Ids absent from pci.ids (a card newer than the snapshot): the old boundaries still tell the modules apart.
# Maxwell starts at 0x1340 (GM108), right above the last Kepler (GK208, 0x1280-0x12BA); the open modules' lowest
# id is 0x1E02 (TITAN RTX, TU102), above the last Volta (GV100, 0x1DB1-0x1DF6) and Pascal (GP108, 0x1D01-0x1D52).
_UNKNOWN_BY_RANGE: Final[tuple[tuple[int, Architecture], ...]] = (
    (0x0000, Architecture("Kepler or older", "", 470, "never")),
    (0x1340, Architecture("Maxwell, Pascal or Volta", "", 580, "never")),
    (0x1E00, Architecture("Turing or newer", "", None, "optional")),
    # The first Blackwell id (GB100, 0x2900-0x2901 in pci.ids): every NVIDIA id from there on that pci.ids does not
    # name yet is a chip newer than the table, and NVIDIA's policy for everything after Hopper is the open modules
    # only (the blog above). Guessing "optional" would accept `kernelModuleType: proprietary` for a card the
    # proprietary flavour cannot drive (FIELD-REVIEW-5 H3).
    (0x2900, Architecture("Blackwell or newer", "", None, "only")),
)
OPEN_MODULES_FROM: Final = "Turing"

# Grace Hopper superchips (GH100 in pci.ids, "GH200 ..."): open modules only, like Blackwell (the blog above).
GRACE_HOPPER: Final = frozenset({"2342", "2348"})
# The MIG User Guide's supported products, by their pci.ids device ids: A100 SXM4 40/80GB and PCIe 40/80GB, A30;
# H100 SXM5 80/94GB and PCIe, H20, H200 SXM and NVL, GH200; B200, GB200; RTX PRO 6000 Blackwell Workstation,
# Max-Q and Server, RTX PRO 5000 Blackwell, RTX PRO 4500 Blackwell.
MIG_CAPABLE: Final = frozenset(
    {
        "20b0", "20b1", "20b2", "20b5", "20f1", "20b7",
        "2330", "2331", "2339", "2329", "2335", "233b", "2342", "2348",
        "2901", "2941",
        "2bb1", "2bb4", "2bb5", "2bb3", "2c31",
    }
)  # fmt: skip
# Measured BARs (MiB, all memory BARs added up).
MEASURED_BAR_MIB: Final[Mapping[str, int]] = {"2335": 16 + 256 * 1024 + 32}

FUNCTION_NAMES: Final[Mapping[str, str]] = {
    "gpu": "the GPU",
    "audio": "the card's HDMI/DP audio controller (PCI class 0403)",
    "usb": "the card's USB host controller (PCI class 0c03)",
    "ucsi": "the card's USB Type-C UCSI controller",
    "nvswitch": "an NVSwitch",
    "bridge": "a PCI bridge on the card",
    "unknown": "a device id this table does not know",
}


@dataclass(frozen=True)
class CardFacts:
    device: str  # "25b0"
    function: Function
    chip: str | None
    architecture: Architecture
    mig: bool
    measured_bar_mib: int | None

    @property
    def open_modules(self) -> OpenModules:
        return "only" if self.device in GRACE_HOPPER else self.architecture.open_modules

    @property
    def described(self) -> str:
        """`a Blackwell card (GB202)`, for messages."""
        chip = f" ({self.chip})" if self.chip else ""
        article = "an" if self.architecture.name[0] in "AEIOU" else "a"
        return f"{article} {self.architecture.name} card{chip}"


@cache
def _data() -> Mapping[str, Any]:
    # Read as the package's resource, not by path: node-check also runs from a zip (day2/bundle.py).
    text = resources.files("knowledge").joinpath("data").joinpath(DATA_FILE.name).read_text(encoding="utf-8")
    document: Mapping[str, Any] = json.loads(text)
    return document


def _device(vendor_device_id: str) -> str:
    return vendor_device_id.lower().rpartition(":")[2]


def _function_of(device: int) -> tuple[str, str] | None:
    for first, last, chip, kind in _data()["functions"]:
        if int(first, 16) <= device <= int(last, 16):
            return chip, kind
    return None


def _architecture(chip: str | None, device: int) -> Architecture:
    if chip is not None:
        for architecture in ARCHITECTURES:
            if chip.startswith(architecture.chip_prefix):
                return architecture
        # pci.ids names a chip whose prefix the table does not know (GR100, GR102 at 10de:3000, 30c0): every older
        # prefix is in ARCHITECTURES (the generated data holds only their chips and these), so it is a chip after
        # Blackwell, open modules only, as NVIDIA's policy for post-Hopper parts says.
        return Architecture(f"post-Blackwell {chip[:2]}", chip[:2], None, "only")
    return [arch for start, arch in _UNKNOWN_BY_RANGE if device >= start][-1]


def card_facts(vendor_device_id: str) -> CardFacts:
    """What the table knows of `10de:xxxx` (the stack file's vendorDeviceId)."""
    device = _device(vendor_device_id)
    found = _function_of(int(device, 16))
    chip, kind = found if found else (None, "unknown")
    function: Function = kind if kind in FUNCTION_NAMES else "unknown"  # type: ignore[assignment]
    return CardFacts(
        device=device,
        function=function,
        chip=chip,
        architecture=_architecture(chip, int(device, 16)),
        mig=device in MIG_CAPABLE,
        measured_bar_mib=MEASURED_BAR_MIB.get(device),
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


class DriverListing(NamedTuple):
    """Whether a driver release lists a card, as its branch's READMEs say."""

    # "listed", "later" (the branch lists it from a newer release), "never" (no release of the branch read lists
    # it), "unknown" (the branch, or this release of it, is newer than the table).
    verdict: Literal["listed", "later", "never", "unknown"]
    # The first release of the branch that lists it ("later"), or of any branch (for "never").
    first: str | None = None


def driver_listing(vendor_device_id: str, driver_version: str) -> DriverListing:
    """Does the open modules' README of `driver_version` (a release, or a branch such as 580) list the card?"""
    branch = driver_version.split(".")[0]
    newest = _data()["openModulesNewest"].get(branch)
    listed: list[str] = _data()["openModulesListed"].get(_device(vendor_device_id), [])
    first_overall = min(listed, key=_version) if listed else None
    if newest is None:
        return DriverListing("unknown")
    in_branch = next((release for release in listed if release.split(".")[0] == branch), None)
    pinned = _version(driver_version)
    if in_branch is not None and (len(pinned) == 1 or pinned >= _version(in_branch)):
        return DriverListing("listed", in_branch)
    older_branch = first_overall is not None and int(branch) < int(first_overall.split(".")[0])
    if len(pinned) > 1 and pinned > _version(newest) and not older_branch:
        # A release newer than the newest one read may list the card already. Not so for a maintenance branch
        # older than the one that first listed the card: its newest release read (535.288.01 came out after
        # 570.86.16 listed the RTX 5090) still does not, and maintenance releases do not add new architectures.
        return DriverListing("unknown")
    if in_branch is not None:
        return DriverListing("later", in_branch)
    return DriverListing("never", first_overall)


def newest_branch_read() -> str:
    """The newest driver branch the table read (for messages that name what it knows)."""
    return str(max(_data()["openModulesNewest"], key=int))
