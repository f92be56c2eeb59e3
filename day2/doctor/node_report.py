"""node-check's JSON, read back by doctor (`--node-check FILE`): one node's own floors, to stand below `driver`.

doctor does not take the file's verdicts on trust: it re-checks the report's cards and driver against the stack
(a capture from another machine, or from before a driver bump, reads healthy on its own) and, with the cluster's
Node, its machine and boot ids (`recheck`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from day2.doctor.floors_types import Fix
from day2.errors import Day2Error
from day2.node_check.floors import FLOOR_NAMES, Floor


@dataclass(frozen=True)
class NodeCheck:
    node: str
    floors: tuple[Floor, ...]
    first_broken: str | None
    fix: Fix | None
    # What the report found: the GPUs' vendor:device ids, the loaded driver, the machine and boot ids.
    cards: tuple[str, ...] = ()
    driver: str | None = None
    machine_id: str | None = None
    boot_id: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The cards' names as NVML gives them (NVIDIA H200), where the report read NVML.
    names: tuple[str, ...] = ()
    # The fix is a power cycle of the VM (node-check's fix.powerCycle); False where the report does not say.
    power_cycle: bool = False


# A report without `facts` (node-check before it wrote them): the same facts, from the floors' own words.
_PCI_CARD = re.compile(r"(?:^|; )[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] (?P<id>[0-9a-f]{4}:[0-9a-f]{4})\b")
_DRIVER = re.compile(r"^nvidia (?P<version>\d+(?:\.\d+){1,2})\b")
_NVML_NAME = re.compile(r"(?:: |; )(?P<name>[^;:]+?) at [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]:")
# GPU Feature Discovery's product label (NVIDIA/k8s-device-plugin README, "Generated Labels": the product name with
# spaces as dashes, `-SHARED` appended on a time-sliced node when the resource is not renamed).
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


def _facts(document: Mapping[str, Any], floors: Sequence[Floor]) -> dict[str, Any]:
    facts = document.get("facts")
    if isinstance(facts, Mapping):
        cards = [c for c in facts.get("cards") or [] if isinstance(c, Mapping)]
        return {
            "cards": tuple(str(c["id"]) for c in cards if c.get("id")),
            "names": tuple(str(c["name"]) for c in cards if c.get("name")),
            "driver": facts.get("driver") if isinstance(facts.get("driver"), str) else None,
            "machine_id": facts.get("machineId") if isinstance(facts.get("machineId"), str) else None,
            "boot_id": facts.get("bootId") if isinstance(facts.get("bootId"), str) else None,
        }
    by_name = {f.name: f for f in floors}
    pci = by_name.get("pci")
    driver = by_name.get("driver")
    nvml = by_name.get("nvml")
    version = _DRIVER.match(driver.detail) if driver is not None and driver.ok is not None else None
    return {
        "cards": tuple(m["id"] for m in _PCI_CARD.finditer(pci.detail)) if pci and pci.ok else (),
        "driver": version["version"] if version else None,
        "names": tuple(m["name"] for m in _NVML_NAME.finditer(nvml.detail)) if nvml and nvml.ok else (),
    }


def parse_node_check(document: Any, source: str) -> NodeCheck:
    """One node-check report; anything else is a Day2Error naming the file and what is wrong."""
    hint = f"--node-check {source}: not the JSON of `gpu-pool node-check -o json`"
    if not isinstance(document, dict) or not isinstance(document.get("floors"), list):
        raise Day2Error(f"{hint} (no floors list)")
    floors = []
    for floor in document["floors"]:
        if (
            not isinstance(floor, dict)
            or floor.get("name") not in FLOOR_NAMES
            or floor.get("ok") not in (True, False, None)
        ):
            raise Day2Error(f"{hint} (a floor is not one of {', '.join(FLOOR_NAMES)} with ok true/false/null)")
        floors.append(Floor(floor["name"], floor["ok"], str(floor.get("detail", ""))))
    node, first, fix = document.get("node"), document.get("firstBroken"), document.get("fix")
    if not isinstance(node, str) or not node:
        raise Day2Error(f"{hint} (no node name)")
    if first is not None and first not in FLOOR_NAMES:
        raise Day2Error(f"{hint} (firstBroken {first!r} is not a node floor)")
    parsed_fix = None
    if isinstance(fix, dict):
        parsed_fix = Fix(tuple(str(t) for t in fix.get("traps") or ()), str(fix.get("command", "")))
    elif first is not None:
        parsed_fix = Fix((), f"gpu-pool node-check on {node}")
    cycles = isinstance(fix, dict) and fix.get("powerCycle") is True
    return NodeCheck(node, tuple(floors), first, parsed_fix, **_facts(document, floors), power_cycle=cycles)


@dataclass(frozen=True)
class NodeExpectations:
    """What doctor knows of the node without the report: the stack's cards and pinned driver, the Node's ids."""

    cards: tuple[str, ...] = ()
    driver: str | None = None
    machine_id: str | None = None
    boot_id: str | None = None
    # The Node's nvidia.com/gpu.product label (GFD), e.g. NVIDIA-RTX-A1000-SHARED.
    product: str | None = None


def product_label(name: str) -> str:
    """`NVIDIA RTX A1000` -> `NVIDIA-RTX-A1000`, as GFD writes it."""
    return name.strip().replace(" ", "-")


def _pinned(version: str, pin: str) -> bool:
    return version == pin or version.startswith(pin + ".")


def recheck(check: NodeCheck, expected: NodeExpectations) -> NodeCheck:
    """The report's floors, with `pci` and `driver` re-judged against the stack and the cluster: a report from
    another machine, or taken before the stack's driver changed, is broken here even where it says ok."""
    verdicts: dict[str, tuple[str, str]] = {}
    notes: list[str] = []
    other_machine = expected.machine_id and check.machine_id and expected.machine_id != check.machine_id
    if other_machine:
        notes.append(
            f"the report is from another machine: its machine-id {check.machine_id}, the Node's {expected.machine_id}"
        )
        verdicts["pci"] = (
            f"the report is from another machine (machine-id {check.machine_id}, the Node has "
            f"{expected.machine_id}): its floors say nothing about {check.node}",
            f"run gpu-pool node-check on {check.node} itself and pass that report",
        )
    elif (
        expected.product
        and check.names
        and expected.product.removesuffix("-SHARED") not in {product_label(n) for n in check.names}
    ):
        notes.append(
            f"the report's card {', '.join(check.names)} is not the Node's {expected.product} "
            f"({GPU_PRODUCT_LABEL}): the report is from another machine"
        )
        verdicts["pci"] = (
            f"the report found {', '.join(check.names)}, but GPU Feature Discovery labelled {check.node} "
            f"{GPU_PRODUCT_LABEL}={expected.product}: the report is from another machine",
            f"run gpu-pool node-check on {check.node} itself and pass that report",
        )
    elif expected.cards and check.cards and sorted(check.cards) != sorted(expected.cards):
        notes.append(
            f"the report's cards {', '.join(check.cards)} are not the stack's {', '.join(expected.cards)}: a report "
            "from another machine, or a card that is not the one the stack passes through"
        )
        verdicts["pci"] = (
            f"re-checked against the stack: the report found {', '.join(check.cards)}, the stack passes "
            f"{', '.join(expected.cards)} to {check.node} (a report from another machine, or another card in the VM)",
            f"run gpu-pool node-check on {check.node} itself; if the report is its own, check the VM's hostpci on the "
            "Proxmox host (qm config <vmid> | grep hostpci)",
        )
    if expected.driver and check.driver and not _pinned(check.driver, expected.driver):
        verdicts.setdefault(
            "driver",
            (
                f"re-checked against the stack: the report's driver {check.driver} is not the stack's pin "
                f"{expected.driver} (taken before a driver change, or on another machine)",
                f"run gpu-pool node-check on {check.node} again; if it still shows {check.driver}, "
                "see the driver pod: gpu-pool doctor's driver floor",
            ),
        )
    if expected.boot_id and check.boot_id and expected.boot_id != check.boot_id and not other_machine:
        notes.append(f"the report is from an earlier boot of {check.node} (boot id {check.boot_id})")
    if not verdicts:
        return replace(check, notes=tuple(notes))
    return _rejudged(check, verdicts, notes)


def _rejudged(check: NodeCheck, verdicts: dict[str, tuple[str, str]], notes: list[str]) -> NodeCheck:
    """The report with the floors `verdicts` names broken (detail, next command), the first of them its first."""
    floors = []
    first: str | None = None
    fix = check.fix
    foreign = "another machine" in verdicts.get("pci", ("", ""))[0]
    for floor in check.floors:
        if floor.name in verdicts and floor.ok is not False:
            detail, command = verdicts[floor.name]
            floor = Floor(floor.name, False, detail)
            if first is None and (check.first_broken is None or _before(floor.name, check.first_broken)):
                first, fix = floor.name, Fix((), command)
        elif foreign and floor.name != "pci":
            # Every floor of another machine's report says nothing about this node.
            floor = Floor(floor.name, None, "not checked: the report is from another machine")
        floors.append(floor)
    return NodeCheck(
        check.node,
        tuple(floors),
        first or check.first_broken,
        fix,
        check.cards,
        check.driver,
        check.machine_id,
        check.boot_id,
        tuple(notes),
        check.names,
        # A floor re-judged broken here is fixed by running node-check on the right node, not by a power cycle.
        power_cycle=check.power_cycle if first is None else False,
    )


def _before(name: str, other: str) -> bool:
    return FLOOR_NAMES.index(name) < FLOOR_NAMES.index(other)


def read_node_checks(paths: Sequence[str]) -> dict[str, NodeCheck]:
    """Node name -> its report. A file may hold one report or a list of them."""
    reports: dict[str, NodeCheck] = {}
    for path in paths:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise Day2Error(f"--node-check {path}: {error.strerror}") from None
        except UnicodeDecodeError:
            # This module runs on the node without config/ (day2/bundle.py): the plain word, no encoding guess.
            raise Day2Error(f"--node-check {path}: not UTF-8 text (the node check writes UTF-8 JSON)") from None
        except json.JSONDecodeError as error:
            raise Day2Error(f"--node-check {path}: not JSON ({error.msg} at line {error.lineno})") from None
        for item in document if isinstance(document, list) else [document]:
            report = parse_node_check(item, path)
            reports[report.node] = report
    return reports
