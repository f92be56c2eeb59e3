"""How a q35 VM's firmware maps a passed-through card's 64-bit BARs: the large-BAR trap.

Facts, each from the source (read 2026-12):
- OVMF (tianocore/edk2 @ 0d5afd18ed4e82fedaaa65478a39cf9898520eda,
  OvmfPkg/Library/PlatformInitLib/MemDetect.c): the 64-bit PCI MMIO aperture is PcdPciMmio64Size, 32 GiB
  (0x800000000 in OvmfPkg/OvmfPkgX64.dsc), the "classic" window, unless PlatformAddressWidthFromCpuid() trusts
  the CPU's physical address width (41 bits or more, or exactly 36/39 on Intel, 40 on AMD; capped at 46, and
  at 40 without 1 GiB pages); then PlatformDynamicMmioWindow() makes the window 2^(bits-3): 64 GiB at 39
  bits, 8 TiB at 46. The fw_cfg knob `opt/ovmf/X-PciMmio64Mb` (PlatformGetFirstNonAddress()) overrides the
  size ("experimental, and might go away at any time").
- QEMU: `-cpu host` (this project's CPU type) is `max` with host-phys-bits=on (target/i386/host-cpu.c,
  host_cpu_max_instance_init), so the guest sees the host CPU's address width; which width that is depends on
  the host (a desktop Core CPU often 39, a server Xeon/EPYC 46-52) and cannot be known at preview.
- Proxmox qemu-server (proxmox/qemu-server @ e6352be67f70042a7433a3a3c712b36d02f9f7cb): the VM's `cpu` option
  has `phys-bits` (8-64|host) and `guest-phys-bits` (src/PVE/QemuServer/CPUConfig.pm, get_cpu_options); it
  passes no X-PciMmio64Mb of its own (no match in src/). Raw QEMU arguments (`args`) are "only root can set"
  (src/PVE/API2/Qemu.pm, $check_vm_modify_config_perm).
- The bpg/proxmoxve provider (pulumi-proxmoxve 8.3.0 schema, VmLegacyCpu) has no phys-bits input;
  `kvmArguments` is Proxmox's root-only `args`.
- SeaBIOS (coreboot/seabios, src/fw/pciinit.c, pci_bios_map_devices): when the 32-bit hole is too small it
  moves the 64-bit BARs above RAM into a window sized from the BARs themselves (aligned to the largest), with no
  fixed cap; the guest then needs enough physical address bits to reach it, which -cpu host gives.

Uncertain: which OVMF build a Proxmox host ships (pve-edk2-firmware) and whether the host CPU's width makes
the dynamic window apply; the preview therefore plans with the classic 32 GiB, the one OVMF always has.
"""

from __future__ import annotations

OVMF_CLASSIC_MMIO64_MIB = 32 * 1024


def mmio64_window_mib(bar_mib: int) -> int:
    """The power-of-two window a card's BARs need: each BAR is naturally aligned, so the sum rounds up."""
    window = 1
    while window < bar_mib:
        window *= 2
    return window
