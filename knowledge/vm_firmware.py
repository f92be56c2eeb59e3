"""How a q35 VM's firmware maps passed-through cards' 64-bit BARs: the large-BAR trap.

Both firmwares size the 64-bit MMIO aperture from the guest CPU's physical address width, and gpu-pool's VMs get
the host's: Proxmox passes the VM's `cpu: host` (this project's CPU type; the bpg provider has no phys-bits input
and sends `host` alone, proxmoxtf vms/custom_cpu_emulation.go EncodeValues, v0.111.1) as `-cpu host` with no
phys-bits option unless the VM config sets one (qemu-server @ e6352be6, src/PVE/QemuServer/CPUConfig.pm
get_cpu_options), and QEMU's `host` model is `max` with host-phys-bits on (qemu target/i386/host-cpu.c @ 05fc711c,
host_cpu_max_instance_init). So what the preview needs is the host CPU's width: `grep -m1 'address sizes'
/proc/cpuinfo` on the Proxmox node (`failureDomains[].hostAddressBits`).

Read 2026-12, at the versions Proxmox ships (pve-edk2-firmware @ cb8a6609: edk2-stable202505 for PVE 9,
edk2-stable202502 for PVE 8; SeaBIOS from QEMU's roms, 1.16.3 and newer):
- OVMF (tianocore/edk2 @ 6951dfe7, the pve-edk2-firmware submodule; OvmfPkg/Library/PlatformInitLib/MemDetect.c):
  PlatformAddressWidthInitialization trusts the CPU's width (PlatformAddressWidthFromCpuid) when it is 41 bits or
  more, exactly 36 or 39 on Intel, or 40 on AMD, caps it at 46 (4-level paging) and at 40 without 1 GiB pages;
  PlatformDynamicMmioWindow then makes the window 2^(bits-3) when that is larger than the classic 32 GiB
  (PcdPciMmio64Size 0x800000000, OvmfPkg/OvmfPkgX64.dsc): 64 GiB at 39 bits, 128 GiB at 40, 8 TiB at 46. An
  untrusted width keeps the classic 32 GiB. The fw_cfg knob opt/ovmf/X-PciMmio64Mb overrides it ("experimental,
  and might go away at any time"), but only through raw QEMU `args`, which Proxmox lets root@pam alone set.
  This replaces an earlier reading here that OVMF's window is always 32 GiB: that holds only for an untrusted
  width, which `cpu: host` on an Intel (39 or 46 bits) or AMD (40 or 48 bits) host is not.
- SeaBIOS (coreboot/seabios @ 41514a7a, src/fw/pciinit.c, pci_setup and pci_bios_map_devices; since rel-1.16.3,
  commit a6ed6b70 "limit address space used for pci devices"): the 64-bit window is sized from the BARs themselves
  (each region aligned to its largest BAR, then to 1 GiB) and placed right below 2^bits, capped at 2^44 unless the
  VM has more than 1 TiB of RAM above 4 GiB; it must stay above RAM (4 GiB plus the RAM above 4 GiB).
- A q35 VM keeps 2 GiB of RAM below 4 GiB when it has 2.75 GiB or more (QEMU hw/i386/pc_q35.c), so a VM of
  M MiB has M - 2048 MiB above 4 GiB.
- Each card sits behind its own PCIe root port (qemu-server src/PVE/QemuServer/PCI.pm, `ich9-pcie-port-N`), whose
  prefetchable window is aligned to the card's largest BAR: a card takes a power-of-two window at least as large as
  its BARs added up, and the windows of several cards add up in the one aperture (FIELD-REVIEW-4, WRONG-6).
"""

from __future__ import annotations

from typing import Final, Literal

Firmware = Literal["seabios", "ovmf"]

OVMF_CLASSIC_MMIO64_MIB: Final = 32 * 1024
# The physical address widths OVMF uses for its dynamic window (PlatformAddressWidthFromCpuid): 41 or more on any
# CPU, 36 or 39 on Intel, 40 on AMD. Intel reports 36, 39, 46 or 52 and AMD 40, 43, 48 or 52, so a width alone says
# which vendor it came from for the ones OVMF only trusts on one of them.
OVMF_TRUSTED_BELOW_41: Final = frozenset({36, 39, 40})
OVMF_MAX_BITS: Final = 46
SEABIOS_MAX_BITS: Final = 44
GIB_MIB: Final = 1024
Q35_RAM_BELOW_4G_MIB: Final = 2 * 1024


def mmio64_window_mib(bar_mib: int) -> int:
    """The power-of-two window a card's BARs need: each BAR is naturally aligned, so the sum rounds up."""
    window = 1
    while window < bar_mib:
        window *= 2
    return window


def ovmf_aperture_mib(host_bits: int | None) -> int:
    """OVMF's 64-bit aperture for a guest with this width (None: unknown, so the classic window it always has)."""
    if host_bits is None or (host_bits < 41 and host_bits not in OVMF_TRUSTED_BELOW_41):
        return OVMF_CLASSIC_MMIO64_MIB
    bits = min(host_bits, OVMF_MAX_BITS)
    return max(OVMF_CLASSIC_MMIO64_MIB, (1 << (bits - 3)) // (1 << 20))


def seabios_aperture_mib(host_bits: int, memory_mib: int) -> int:
    """The room SeaBIOS has for the 64-bit window: from above RAM up to 2^min(bits, 44)."""
    top_mib = (1 << min(host_bits, SEABIOS_MAX_BITS)) // (1 << 20)
    above_ram_mib = 4 * GIB_MIB + max(0, memory_mib - Q35_RAM_BELOW_4G_MIB)
    return max(0, top_mib - above_ram_mib)


def aperture_mib(firmware: Firmware, host_bits: int | None, memory_mib: int) -> int | None:
    """The 64-bit MMIO room the VM's firmware has; None where it depends on a width the preview was not given."""
    if firmware == "ovmf":
        return ovmf_aperture_mib(host_bits)
    return None if host_bits is None else seabios_aperture_mib(host_bits, memory_mib)


def windows_mib(bars_mib: list[int]) -> int:
    """What several cards take together: each its own power-of-two, 1 GiB-aligned window, added up (descending
    powers of two pack without gaps)."""
    return sum(max(mmio64_window_mib(bar), GIB_MIB) for bar in bars_mib)


def size_text(mib: int) -> str:
    for unit, shift in (("TiB", 20), ("GiB", 10)):
        if mib >= 1 << shift and mib % (1 << shift) == 0:
            return f"{mib >> shift} {unit}"
    return f"{mib} MiB"
