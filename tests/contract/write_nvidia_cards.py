"""Write knowledge/data/nvidia_cards.json from two public sources:

- the PCI ID Repository's pci.ids (github.com/pciutils/pciids), for every NVIDIA device id: its chip and whether
  it is a GPU or one of the card's other functions (HDMI audio, USB, UCSI);
- the README of NVIDIA's open GPU kernel modules at every release tag (github.com/NVIDIA/open-gpu-kernel-modules,
  "Compatible GPUs"), for the first release of each driver branch that lists a device id.

    git clone https://github.com/pciutils/pciids /tmp/pciids
    git clone https://github.com/NVIDIA/open-gpu-kernel-modules /tmp/open-gpu-kernel-modules
    GPU_POOL_PCI_IDS=/tmp/pciids GPU_POOL_OPEN_GPU_KERNEL_MODULES=/tmp/open-gpu-kernel-modules \
        .venv/bin/python -m tests.contract.write_nvidia_cards
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from knowledge.gpu_cards import DATA_FILE

PCI_IDS_ENV = "GPU_POOL_PCI_IDS"
OPEN_MODULES_ENV = "GPU_POOL_OPEN_GPU_KERNEL_MODULES"
NVIDIA_VENDOR = "10de"
# A chip code leading a pci.ids device name: GA107GL, GB202, TU102, AD106M, GH100.
CHIP = re.compile(r"^(?P<chip>(?:GK|GM|GP|GV|TU|GA|GH|AD|GB|GR)\d{2,3}[A-Z]*)\b")
# One row of the README's "Compatible GPUs" table: | NVIDIA RTX A1000 | 25B0 1028 1878 |
README_ROW = re.compile(r"^\| [^|]+\| (?P<device>[0-9A-F]{4})(?: [0-9A-F]{4} [0-9A-F]{4})? +\|$")
RELEASE_TAG = re.compile(r"^(?P<branch>\d{3})\.\d+(?:\.\d+)?$")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _kind(name: str) -> str:
    if "Audio" in name:
        return "audio"
    if "UCSI" in name:
        return "ucsi"
    if "USB" in name:
        return "usb"
    if "NVSwitch" in name:
        return "nvswitch"
    if "bridge" in name:
        return "bridge"
    return "gpu"


def pci_functions(pci_ids: str) -> list[list[str]]:
    """Ranges of consecutive NVIDIA device ids with one chip and kind: [first, last, chip, kind]."""
    entries: list[tuple[int, str, str]] = []
    inside = False
    for line in pci_ids.splitlines():
        if re.match(r"^[0-9a-f]{4}  ", line):
            inside = line.startswith(NVIDIA_VENDOR + "  ")
            continue
        match = re.match(r"^\t(?P<id>[0-9a-f]{4})  (?P<name>.*)$", line)
        if not inside or not match:
            continue
        found = CHIP.match(match["name"])
        if found:
            entries.append((int(match["id"], 16), found["chip"], _kind(match["name"])))
    ranges: list[list[str]] = []
    for device, chip, kind in sorted(entries):
        if ranges and ranges[-1][2:] == [chip, kind] and int(ranges[-1][1], 16) == device - 1:
            ranges[-1][1] = f"{device:04x}"
        else:
            ranges.append([f"{device:04x}", f"{device:04x}", chip, kind])
    return ranges


def _version_key(tag: str) -> tuple[int, ...]:
    return tuple(int(part) for part in tag.split("."))


def release_tags(repo: Path) -> list[str]:
    return sorted((t for t in _git(repo, "tag").split() if RELEASE_TAG.match(t)), key=_version_key)


def open_modules(repo: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The newest tag of each branch read, and per device id the first tag of each branch that lists it."""
    tags = release_tags(repo)
    newest: dict[str, str] = {}
    first: dict[str, dict[str, str]] = {}
    for tag in tags:
        branch = tag.split(".")[0]
        newest[branch] = tag
        for line in _git(repo, "show", f"{tag}:README.md").splitlines():
            row = README_ROW.match(line)
            if row:
                first.setdefault(row["device"].lower(), {}).setdefault(branch, tag)
    listed = {device: sorted(branches.values(), key=_version_key) for device, branches in sorted(first.items())}
    return dict(sorted(newest.items())), listed


def render(pci_ids_repo: Path, open_modules_repo: Path) -> str:
    pci_ids = _git(pci_ids_repo, "show", "HEAD:pci.ids")
    newest, listed = open_modules(open_modules_repo)
    tags = release_tags(open_modules_repo)
    sources = {
        "pci.ids": f"github.com/pciutils/pciids@{_git(pci_ids_repo, 'rev-parse', 'HEAD').strip()}",
        "openModules": f"github.com/NVIDIA/open-gpu-kernel-modules README.md, tags {tags[0]} to {tags[-1]}",
    }

    def rows(items: list[str]) -> str:
        return "[\n" + ",\n".join(f"  {item}" for item in items) + "\n ]"

    functions = [json.dumps(entry) for entry in pci_functions(pci_ids)]
    listed_rows = [f"{json.dumps(device)}: {json.dumps(releases)}" for device, releases in listed.items()]
    # One range or one device per line, so a regenerated file diffs line by line.
    return (
        "{\n"
        f' "sources": {json.dumps(sources)},\n'
        f' "functions": {rows(functions)},\n'
        f' "openModulesNewest": {json.dumps(newest)},\n'
        f' "openModulesListed": {{\n' + ",\n".join(f"  {row}" for row in listed_rows) + "\n }\n"
        "}\n"
    )


def main() -> int:
    pci_ids, modules = os.environ.get(PCI_IDS_ENV), os.environ.get(OPEN_MODULES_ENV)
    if not pci_ids or not modules:
        print(f"set {PCI_IDS_ENV} and {OPEN_MODULES_ENV} to git clones (see the docstring)", file=sys.stderr)
        return 2
    DATA_FILE.write_text(render(Path(pci_ids), Path(modules)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
