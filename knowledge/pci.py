"""PCI facts node-check reads a GPU worker's sysfs and kernel log with. Plain data: node-check runs on the node
with only the Python standard library.

Sources:
- Class codes: PCI-SIG "PCI Code and ID Assignment Specification" r1.15, section 1.4 (base class 03h display
  controller; 0300h VGA compatible, 0302h 3D controller, 0380h other display controller). NVIDIA's data-centre
  cards (H100/H200, A100) enumerate as 0302h, desktop and workstation cards (RTX A1000) as 0300h; the card's
  HDMI audio function is 0403h and is not a GPU.
- Resource flags in sysfs `resource` (third column): torvalds/linux v6.18, include/linux/ioport.h
  (IORESOURCE_IO 0x100, IORESOURCE_MEM 0x200, IORESOURCE_PREFETCH 0x2000, IORESOURCE_MEM_64 0x100000,
  IORESOURCE_DISABLED 0x10000000, IORESOURCE_UNSET 0x20000000); the file is written by resource_show() in
  drivers/pci/pci-sysfs.c, one `start end flags` line per resource, BARs 0-5 first.
- Assignment failures in the kernel log: drivers/pci/setup-res.c pci_assign_resource(). Since v6.8
  ("PCI: Use resource names in PCI log messages") `BAR 2 [mem size 0x4000000000 64bit pref]: can't assign;
  no space` then `...: failed to assign`; before it `BAR 2: no space for [mem size ...]` and
  `BAR 2: failed to assign [mem size ...]`. A later pass (bridge windows resized, `pci=realloc`) can still place
  it: `BAR 2 [mem 0x...-0x... 64bit pref]: assigned` (v6.8+; before: `BAR 2: assigned [mem ...]`), and then the
  earlier failure no longer counts. Enumeration logs each BAR the device has as
  `pci 0000:00:06.0: BAR 2 [mem 0x100000000000-0x103fffffffff 64bit pref]` (drivers/pci/probe.c
  __pci_read_base(), v6.8+) — seen on the lent H200, tests/fixtures/node_check/h200/dmesg.txt.
- Link speed/width files (`current_link_speed`, `max_link_speed`, `current_link_width`, `max_link_width`):
  drivers/pci/pci-sysfs.c; speed reads like `32.0 GT/s PCIe` (PCIe 5.0), `Unknown` where the port has none.
"""

from __future__ import annotations

import re

NVIDIA_VENDOR_ID = 0x10DE
DISPLAY_BASE_CLASS = 0x03
CLASS_NAMES = {0x0300: "VGA compatible controller", 0x0302: "3D controller", 0x0380: "display controller"}

IORESOURCE_IO = 0x100
IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000
IORESOURCE_MEM_64 = 0x100000
IORESOURCE_DISABLED = 0x10000000
IORESOURCE_UNSET = 0x20000000
# BARs are resources 0-5 of the `resource` file; 6 is the expansion ROM, then bridge windows / SR-IOV.
BAR_COUNT = 6

# `pci 0000:00:06.0: BAR 2 [mem 0x100000000000-0x103fffffffff 64bit pref]` (enumeration, v6.8+).
BAR_ENUMERATED = re.compile(
    r"pci (?P<addr>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): BAR (?P<bar>\d) \[mem (?P<start>0x[0-9a-f]+)-"
    r"(?P<end>0x[0-9a-f]+)[^\]]*\]$",
    re.IGNORECASE,
)
# Both wordings of an assignment failure, old and new (see the module docstring).
BAR_FAILED = re.compile(
    r"pci (?P<addr>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): BAR (?P<bar>\d)"
    r"(?::| \[[^\]]*\]:) (?P<what>no space for|failed to assign|can't assign; no space)",
    re.IGNORECASE,
)
# A (later) successful assignment of that BAR, both wordings.
BAR_ASSIGNED = re.compile(
    r"pci (?P<addr>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): BAR (?P<bar>\d)(?: \[[^\]]*\])?: assigned",
    re.IGNORECASE,
)
