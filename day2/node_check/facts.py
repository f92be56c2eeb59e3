"""What node-check reads on a GPU worker: its PCI devices from sysfs, the nvidia module, the kernel log, NVML.

Standard library only: node-check runs on the node (over SSH, in a privileged pod, under `kubectl debug
node/...`), where python3 exists and this project's virtual environment does not. Every path takes a root, so
a copy of `/sys` and `/proc` and a saved `dmesg` read exactly as the live system does (the tests' fixture is a
real copy from an H200 in a VM).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowledge import pci


class NodeInputError(Exception):
    """A root, file or reading that cannot be used: one line, exit 2 (no traceback)."""


@dataclass(frozen=True)
class Bar:
    index: int
    start: int
    end: int
    flags: int

    @property
    def size(self) -> int:
        return self.end - self.start + 1 if self.end > self.start else 0

    @property
    def is_memory(self) -> bool:
        return bool(self.flags & pci.IORESOURCE_MEM)

    @property
    def assigned(self) -> bool:
        return self.start != 0 and not self.flags & (pci.IORESOURCE_UNSET | pci.IORESOURCE_DISABLED)


@dataclass(frozen=True)
class PciDevice:
    address: str  # 0000:00:06.0
    vendor: int
    device: int
    class_code: int  # 0x030200
    subsystem_vendor: int | None
    subsystem_device: int | None
    driver: str | None  # the name the `driver` link points to
    bars: tuple[Bar, ...]
    current_link_speed: str | None
    max_link_speed: str | None
    current_link_width: int | None
    max_link_width: int | None

    @property
    def is_gpu(self) -> bool:
        return self.vendor == pci.NVIDIA_VENDOR_ID and self.class_code >> 16 == pci.DISPLAY_BASE_CLASS

    @property
    def id(self) -> str:
        return f"{self.vendor:04x}:{self.device:04x}"

    @property
    def subsystem(self) -> str | None:
        if self.subsystem_vendor is None or self.subsystem_device is None:
            return None
        return f"{self.subsystem_vendor:04x}:{self.subsystem_device:04x}"


@dataclass(frozen=True)
class DriverModule:
    sys_version: str | None  # /sys/module/nvidia/version
    proc_version: str | None  # first line of /proc/driver/nvidia/version
    container_root: bool  # /run/nvidia/driver: the GPU Operator's driver container put its root there


@dataclass(frozen=True)
class NodeFacts:
    devices: tuple[PciDevice, ...]
    module: DriverModule
    kernel_log: tuple[str, ...] | None  # None: not readable
    # The NVML reading (the shape nvml_reading() writes) or None with the reason it is missing.
    nvml: Mapping[str, Any] | None
    nvml_missing: str | None = None
    # Which machine and boot this is: /etc/machine-id and /proc/sys/kernel/random/boot_id, what the kubelet
    # reports as the Node's status.nodeInfo machineID and bootID; doctor compares them with the cluster's Node.
    machine_id: str | None = None
    boot_id: str | None = None

    @property
    def gpus(self) -> tuple[PciDevice, ...]:
        return tuple(d for d in self.devices if d.is_gpu)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _hex(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    return int(text) if text and text.isdigit() else None


def parse_resource(text: str) -> tuple[Bar, ...]:
    """The BAR lines (0-5) of a sysfs `resource` file: `start end flags` in hex."""
    bars = []
    for index, line in enumerate(text.splitlines()[: pci.BAR_COUNT]):
        start, end, flags = (int(word, 16) for word in line.split())
        bars.append(Bar(index, start, end, flags))
    return tuple(bars)


def read_device(directory: Path) -> PciDevice | None:
    """One device directory (`/sys/bus/pci/devices/<addr>` resolved); None where a copy left it out."""
    vendor, device, class_code = _hex(directory / "vendor"), _hex(directory / "device"), _hex(directory / "class")
    if vendor is None or device is None or class_code is None:
        return None
    try:
        driver: str | None = os.path.basename(os.readlink(directory / "driver"))
    except OSError:
        driver = None
    resource = _read(directory / "resource")
    try:
        bars = parse_resource(resource) if resource else ()
    except ValueError:
        raise NodeInputError(f"{directory / 'resource'}: not the kernel's `start end flags` lines") from None
    return PciDevice(
        address=directory.name,
        vendor=vendor,
        device=device,
        class_code=class_code,
        subsystem_vendor=_hex(directory / "subsystem_vendor"),
        subsystem_device=_hex(directory / "subsystem_device"),
        driver=driver,
        bars=bars,
        current_link_speed=_read(directory / "current_link_speed"),
        max_link_speed=_read(directory / "max_link_speed"),
        current_link_width=_int(directory / "current_link_width"),
        max_link_width=_int(directory / "max_link_width"),
    )


def read_devices(sysfs_root: Path) -> tuple[PciDevice, ...]:
    """Every PCI device the kernel lists in bus/pci/devices (links into devices/, followed inside the root)."""
    listing = sysfs_root / "bus" / "pci" / "devices"
    if not listing.is_dir():
        raise NodeInputError(f"{listing} is not a directory: --sysfs-root must be /sys or a copy with its layout")
    devices = []
    for entry in sorted(listing.iterdir()):
        # The links are relative (../../../devices/pci0000:00/...), so they resolve inside a copy too.
        target = entry.resolve() if entry.is_symlink() else entry
        read = read_device(target) if target.is_dir() else None
        if read is not None:
            devices.append(PciDevice(**{**read.__dict__, "address": entry.name}))
    return tuple(devices)


def read_module(sysfs_root: Path, proc_root: Path, run_root: Path) -> DriverModule:
    proc = _read(proc_root / "driver" / "nvidia" / "version")
    return DriverModule(
        sys_version=_read(sysfs_root / "module" / "nvidia" / "version"),
        proc_version=proc.splitlines()[0] if proc else None,
        container_root=(run_root / "nvidia" / "driver").is_dir(),
    )


def read_kernel_log(path: Path | None) -> tuple[str, ...] | None:
    """A saved `dmesg` (or `journalctl -k`) file; without one, /dev/kmsg is not read (it blocks): None."""
    if path is None:
        return None
    text = _read(path)
    if text is None:
        raise NodeInputError(f"--kernel-log {path}: cannot be read")
    return tuple(text.splitlines())


def read_nvml_json(path: Path) -> Mapping[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise NodeInputError(f"--nvml-json {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise NodeInputError(f"--nvml-json {path}: not UTF-8 text (NVML's report is UTF-8 JSON)") from None
    except json.JSONDecodeError as error:
        raise NodeInputError(f"--nvml-json {path}: not JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(document, dict) or not isinstance(document.get("gpus"), list):
        raise NodeInputError(f"--nvml-json {path}: no `gpus` list; write one with node-check --save-nvml FILE")
    if not isinstance(document.get("driver"), str | None):
        raise NodeInputError(f"--nvml-json {path}: driver is {document['driver']!r}, not a version string or null")
    for index, gpu in enumerate(document["gpus"]):
        if problem := _nvml_gpu_problem(gpu):
            raise NodeInputError(
                f"--nvml-json {path}: gpus[{index}] {problem}; write the reading with node-check --save-nvml FILE"
            )
    return document


# The values the floors compare or count: an integer where NVML reported one, null where it did not.
_NVML_INTEGERS = ("virtualizationMode", "persistenceMode", "eccVolatileUncorrected", "throttleReasons")


def _nvml_gpu_problem(gpu: object) -> str | None:
    """What makes one entry of a saved reading unusable (a hand-edited or foreign file), or None."""
    if not isinstance(gpu, dict):
        return "is not an object"
    pci_info = gpu.get("pci")
    bus_id = pci_info.get("busId") if isinstance(pci_info, dict) else None
    try:
        _bus_key(bus_id if isinstance(bus_id, str) else "")
    except ValueError:
        return f"has no pci.busId like 00000000:00:06.0 (found {bus_id!r})"
    for key in _NVML_INTEGERS:
        value = gpu.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"{key} is {value!r}, not an integer or null"
    rows = gpu.get("remappedRows")
    if rows is not None and not (isinstance(rows, list) and all(isinstance(r, int) for r in rows)):
        return f"remappedRows is {rows!r}, not a list of integers or null"
    return None


def nvml_gpu(reading: Mapping[str, Any], address: str) -> Mapping[str, Any] | None:
    """The reading's GPU at a sysfs address (NVML writes the domain with 8 digits: 00000000:00:06.0)."""
    want = _bus_key(address)
    for gpu in reading.get("gpus", []):
        bus_id = (gpu.get("pci") or {}).get("busId")
        if isinstance(bus_id, str) and _bus_key(bus_id) == want:
            return gpu  # type: ignore[no-any-return]
    return None


def _bus_key(address: str) -> tuple[int, int, int, int]:
    domain, bus, rest = address.lower().rsplit(":", 2)
    device, _, function = rest.partition(".")
    return int(domain, 16), int(bus, 16), int(device, 16), int(function or "0", 16)


def xid_addresses(address: str) -> str:
    """The `0000:00:06` form Xid lines use (no function)."""
    return address.lower().rsplit(".", 1)[0]


def assignment_failures(log: Sequence[str], address: str) -> list[str]:
    """Kernel log lines saying one of the device's BARs got no address, unless a later line assigned it."""
    found: dict[str, list[str]] = {}
    for line in log:
        if (match := pci.BAR_FAILED.search(line)) and match["addr"].lower() == address.lower():
            found.setdefault(match["bar"], []).append(f"BAR {match['bar']}: {match['what']}")
        elif (match := pci.BAR_ASSIGNED.search(line)) and match["addr"].lower() == address.lower():
            found.pop(match["bar"], None)
    return [failure for failures in found.values() for failure in failures]


def enumerated_bars(log: Sequence[str], address: str) -> set[int]:
    """The BARs the kernel logged when it enumerated the device (to catch one that later vanished)."""
    bars = set()
    for line in log:
        match = pci.BAR_ENUMERATED.search(line)
        if match and match["addr"].lower() == address.lower():
            bars.add(int(match["bar"]))
    return bars


def read_identity(etc_root: Path | None, proc_root: Path) -> tuple[str | None, str | None]:
    """(machine id, boot id) of the machine the files come from; None where a copy lacks them."""
    machine = _read(etc_root / "machine-id") if etc_root is not None else None
    boot = _read(proc_root / "sys" / "kernel" / "random" / "boot_id")
    return (machine.strip() or None) if machine else None, (boot.strip() or None) if boot else None
