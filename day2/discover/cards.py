"""`gpu-pool discover`: the NVIDIA cards of a Proxmox node, as stack-file entries to paste.

Reads the answer of `GET /nodes/{node}/hardware/pci` (from the Proxmox API, or saved with
`pvesh get /nodes/<node>/hardware/pci --output-format json`). Its fields are those of pve-common's
PVE::SysFSTools::lspci (proxmox/pve-common, src/PVE/SysFSTools.pm at 0a2e2aae, the `lspci` sub's return
format), which PVE::API2::Hardware::PCI returns with verbose on: `id` (`0000:01:00.0`), `vendor`/`device`
(`0x10de`), `class` (`0x030000`), `iommugroup` (an int, -1 without IOMMU), `subsystem_vendor`/`subsystem_device`,
and the pci.ids names `vendor_name`, `device_name`. The API hides classes 05, 06 and 0b by default
(`pci-class-blacklist`), so bridges are not in the answer: every other device in a card's group is an endpoint.

"Already mapped" means mapped in Proxmox: `GET /cluster/mapping/pci` (proxmox/pve-manager,
PVE/API2/Cluster/Mapping/PCI.pm, the `index` method) lists each mapping as `{id, description, map: [...]}`, each
`map` entry a property string of PVE::Mapping::PCI's `$map_fmt` (proxmox/pve-guest-common,
src/PVE/Mapping/PCI.pm): `node=<node>,path=<address>[;<address>...],id=<vendor:device>,iommugroup=...,
subsystem-id=...`; a path without a function maps the whole device. The API lists only the mappings the token
may see (Mapping.Audit, Mapping.Use or Mapping.Modify on /mapping/pci/<id>).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from day2.errors import Day2Error
from knowledge.gpu_cards import card_facts

NVIDIA = "10de"
# PCI base class 03 (display): 0300 VGA, 0302 3D controller (data-centre and most workstation cards).
DISPLAY_CLASSES = ("0300", "0302")
_BRACKETED = re.compile(r"\[([^\]]+)\]")


def _hex(value: Any) -> str:
    text = str(value or "").lower()
    return text[2:] if text.startswith("0x") else text


@dataclass(frozen=True)
class Device:
    id: str
    vendor: str
    device: str
    pci_class: str
    iommu_group: int
    subsystem: str
    name: str

    @property
    def slot(self) -> str:
        return self.id.split(".")[0]

    @property
    def is_bridge(self) -> bool:
        return self.pci_class.startswith("06")


def parse_answer(answer: Any, source: str) -> list[Device]:
    """The devices of one `hardware/pci` answer: a JSON list, or the API's `{"data": [...]}`."""
    if isinstance(answer, Mapping) and "data" in answer:
        answer = answer["data"]
    if not isinstance(answer, list) or not all(isinstance(item, Mapping) and "id" in item for item in answer):
        raise Day2Error(
            f"{source} is not the answer of `pvesh get /nodes/<node>/hardware/pci --output-format json`: "
            "expected a JSON list of devices with id, vendor, device, class and iommugroup"
        )
    devices = []
    for item in answer:
        group = item.get("iommugroup", -1)
        address = str(item["id"]).lower()
        devices.append(
            Device(
                id=address if address.count(":") == 2 else f"0000:{address}",
                vendor=_hex(item.get("vendor")),
                device=_hex(item.get("device")),
                pci_class=_hex(item.get("class")),
                iommu_group=int(group) if isinstance(group, int | str) and str(group).lstrip("-").isdigit() else -1,
                subsystem=f"{_hex(item.get('subsystem_vendor'))}:{_hex(item.get('subsystem_device'))}",
                name=str(item.get("device_name") or ""),
            )
        )
    return devices


def model_name(device: Device) -> str:
    """`GA107GL [RTX A1000]` (pci.ids) -> `NVIDIA RTX A1000`: the marketing name is the bracketed part."""
    bracketed = _BRACKETED.findall(device.name)
    if bracketed:
        return f"NVIDIA {bracketed[-1].split('/')[0].strip()}"
    return f"NVIDIA {device.name}" if device.name else f"NVIDIA {NVIDIA}:{device.device}"


@dataclass
class Card:
    node: str
    entry: dict[str, Any]
    functions: list[str]
    problems: list[str] = field(default_factory=list)
    in_stack: str | None = None
    # The Proxmox PCI mapping that already names this card on this node, if any.
    mapped_as: str | None = None
    # What the card table (knowledge/gpu_cards.py) knows of the model: chip, architecture, modules, MIG.
    facts: str = ""

    @property
    def passable(self) -> bool:
        return not self.problems


def card_summary(vendor_device_id: str) -> str:
    """`GA107GL, Ampere; open or proprietary kernel modules` from the one card table."""
    table = card_facts(vendor_device_id)
    if table.chip is None:
        return f"not in the card table ({table.architecture.name} by its id)"
    modules = {
        "never": "proprietary kernel modules only",
        "optional": "open or proprietary kernel modules",
        "only": "open kernel modules only",
    }[table.open_modules]
    last = f"; last driver branch R{table.architecture.last_branch}" if table.architecture.last_branch else ""
    mig = "; MIG capable (gpu-pool passes it whole or time-sliced)" if table.mig else ""
    return f"{table.chip}, {table.architecture.name}; {modules}{last}{mig}"


def bars_mib(resource: str) -> int:
    """The memory BARs of a sysfs `resource` file (the host's /sys/bus/pci/devices/<address>/resource), added up
    in MiB, rounded up: what `barMiB` takes."""
    from day2.node_check.facts import parse_resource  # node-check's reader of the same file

    total = sum(bar.size for bar in parse_resource(resource) if bar.is_memory)
    return -(-total // (1 << 20))


def _property_string(text: str) -> dict[str, str]:
    pairs = (part.partition("=") for part in text.split(","))
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


def proxmox_mappings(answer: Any, source: str) -> dict[str, str]:
    """`node/slot` -> mapping id, from the answer of `GET /cluster/mapping/pci` (a list, or `{"data": [...]}`)."""
    if isinstance(answer, Mapping) and "data" in answer:
        answer = answer["data"]
    if not isinstance(answer, list) or not all(isinstance(item, Mapping) and "id" in item for item in answer):
        raise Day2Error(
            f"{source} is not the answer of `pvesh get /cluster/mapping/pci --output-format json`: "
            "expected a JSON list of mappings with id and map"
        )
    found: dict[str, str] = {}
    for mapping in answer:
        for entry in mapping.get("map") or []:
            fields = _property_string(str(entry))
            for path in fields.get("path", "").split(";"):
                address = path.strip().lower()
                if address:
                    slot = (address if address.count(":") == 2 else f"0000:{address}").split(".")[0]
                    found.setdefault(f"{fields.get('node')}/{slot}", str(mapping["id"]))
    return found


def find_cards(
    node: str,
    devices: Sequence[Device],
    mapped: Mapping[str, str],
    in_proxmox: Mapping[str, str] | None = None,
    bars: Mapping[str, int] | None = None,
) -> list[Card]:
    """Each NVIDIA display or 3D controller (function 0) of the node, with why it cannot be passed through."""
    cards = []
    gpus = [d for d in devices if d.vendor == NVIDIA and d.pci_class[:4] in DISPLAY_CLASSES]
    for gpu in sorted(gpus, key=lambda d: d.id):
        functions = sorted(d.id for d in devices if d.slot == gpu.slot)
        card_id = f"{gpu.vendor}:{gpu.device}"
        entry: dict[str, Any] = {
            "pciAddress": gpu.slot,
            "vendorDeviceId": card_id,
            "subsystemId": gpu.subsystem,
            "iommuGroup": gpu.iommu_group,
            "model": model_name(gpu),
        }
        # The BARs the host shows (its sysfs `resource`), else what was measured for the model (the card table).
        bar = (bars or {}).get(gpu.slot) or (bars or {}).get(gpu.id) or card_facts(card_id).measured_bar_mib
        if bar is not None:
            entry["barMiB"] = bar
        key = f"{node}/{gpu.slot}"
        card = Card(
            node,
            entry,
            functions,
            in_stack=mapped.get(key),
            mapped_as=(in_proxmox or {}).get(key),
            facts=card_summary(card_id),
        )
        if gpu.iommu_group < 0:
            card.problems.append("in no IOMMU group: IOMMU is off on the host (intel_iommu=on iommu=pt, reboot)")
        else:
            others = sorted(
                f"{d.id} ({d.name or d.vendor + ':' + d.device})"
                for d in devices
                if d.iommu_group == gpu.iommu_group and d.slot != gpu.slot and not d.is_bridge
            )
            if others:
                card.problems.append(
                    f"cannot be passed through alone: IOMMU group {gpu.iommu_group} also holds {', '.join(others)} "
                    "(another slot, or ACS on the host, may separate them)"
                )
        cards.append(card)
    return cards


def stack_cards(raw_domains: Any) -> dict[str, str]:
    """`node/slot` -> `failureDomains[name].gpu` for every card a (possibly incomplete) stack file names."""
    found: dict[str, str] = {}
    for domain in raw_domains if isinstance(raw_domains, list) else []:
        if not isinstance(domain, Mapping):
            continue
        gpus = [domain["gpu"]] if isinstance(domain.get("gpu"), Mapping) else domain.get("gpus") or []
        for index, gpu in enumerate(gpus if isinstance(gpus, list) else []):
            if isinstance(gpu, Mapping) and gpu.get("pciAddress"):
                key = "gpu" if "gpu" in domain else f"gpus[{index}]"
                slot = str(gpu["pciAddress"]).lower().split(".")[0]
                found[f"{domain.get('proxmoxNode')}/{slot}"] = f"failureDomains[{domain.get('name')}].{key}"
    return found


def _stack_card_ids(raw_domains: Any) -> dict[str, set[tuple[str, str]]]:
    """Proxmox node -> the (slot, vendor:device) of every card the stack file gives its domains."""
    found: dict[str, set[tuple[str, str]]] = {}
    for domain in raw_domains if isinstance(raw_domains, list) else []:
        if not isinstance(domain, Mapping):
            continue
        gpus = [domain["gpu"]] if isinstance(domain.get("gpu"), Mapping) else domain.get("gpus") or []
        for gpu in gpus if isinstance(gpus, list) else []:
            if isinstance(gpu, Mapping) and gpu.get("pciAddress") and gpu.get("vendorDeviceId"):
                slot = str(gpu["pciAddress"]).lower().split(".")[0]
                slot = slot if slot.count(":") == 2 else f"0000:{slot}"
                card = (slot, str(gpu["vendorDeviceId"]).lower())
                found.setdefault(str(domain.get("proxmoxNode")), set()).add(card)
    return found


def other_nodes_answer(node: str, devices: Sequence[Device], raw_domains: Any) -> str | None:
    """A saved answer that holds none of the cards the stack gives `node` and all of another node's: saved on that
    other node (the answer does not say which node it is from). None where the stack cannot tell."""
    present = {(d.slot, f"{d.vendor}:{d.device}") for d in devices}
    by_node = _stack_card_ids(raw_domains)
    mine = by_node.get(node, set())
    if not mine or mine & present:
        return None
    others = sorted(other for other, cards in by_node.items() if other != node and cards and cards <= present)
    return others[0] if others else None


def _yaml_scalar(value: Any) -> str:
    # Quoted: an unquoted 0000:01:00 or 10de:2204 is fine in YAML 1.2, but not in every reader.
    return json.dumps(value) if isinstance(value, str) else str(value)


def stack_entry(cards: Sequence[Card]) -> str:
    """The lines to paste under the node's domain: `gpu:` for one card, `gpus:` for several."""
    if len(cards) == 1:
        return "gpu:\n" + "".join(f"  {key}: {_yaml_scalar(value)}\n" for key, value in cards[0].entry.items())
    lines = ["gpus:\n"]
    for card in cards:
        items = list(card.entry.items())
        lines.append(f"  - {items[0][0]}: {_yaml_scalar(items[0][1])}\n")
        lines += [f"    {key}: {_yaml_scalar(value)}\n" for key, value in items[1:]]
    return "".join(lines)


def report_json(nodes: Mapping[str, Sequence[Card]]) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "node": node,
                "cards": [
                    {
                        **card.entry,
                        "functions": card.functions,
                        "passable": card.passable,
                        "problems": card.problems,
                        "inStack": card.in_stack,
                        "proxmoxMapping": card.mapped_as,
                        "card": card.facts,
                    }
                    for card in cards
                ],
            }
            for node, cards in nodes.items()
        ]
    }


def report_text(nodes: Mapping[str, Sequence[Card]]) -> str:
    out: list[str] = []
    for node, cards in nodes.items():
        if not cards:
            out.append(f"# {node}: no NVIDIA display or 3D controller in the answer\n")
            continue
        passable = [c for c in cards if c.passable]
        out.append(f"# {node}: {len(cards)} NVIDIA card{'s' if len(cards) != 1 else ''}\n")
        for card in cards:
            note = f", already in the stack as {card.in_stack}" if card.in_stack else ""
            note += f", mapped in Proxmox as {card.mapped_as}" if card.mapped_as else ""
            out.append(
                f"#   {card.entry['pciAddress']} {card.entry['model']}: functions {', '.join(card.functions)}{note}\n"
            )
            if card.facts:
                out.append(f"#     {card.facts}\n")
            out += [f"#     NOT USABLE: {problem}\n" for problem in card.problems]
        if passable:
            out.append(f"# paste under the domain with proxmoxNode: {node}\n")
            out.append(stack_entry(passable))
        out.append("\n")
    return "".join(out).rstrip("\n") + "\n"
