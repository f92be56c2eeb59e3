"""node-check's JSON, read back by doctor (`--node-check FILE`): one node's own floors, to stand below `driver`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from day2.errors import Day2Error
from day2.floors_types import Fix
from day2.node_floors import FLOOR_NAMES


@dataclass(frozen=True)
class NodeCheckFloor:
    name: str
    ok: bool | None
    detail: str


@dataclass(frozen=True)
class NodeCheck:
    node: str
    floors: tuple[NodeCheckFloor, ...]
    first_broken: str | None
    fix: Fix | None
    # The fix is a power cycle of the VM (node-check's fix.powerCycle); False where the report does not say.
    power_cycle: bool = False


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
        floors.append(NodeCheckFloor(floor["name"], floor["ok"], str(floor.get("detail", ""))))
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
    return NodeCheck(node, tuple(floors), first, parsed_fix, cycles)


def read_node_checks(paths: Sequence[str]) -> dict[str, NodeCheck]:
    """Node name -> its report. A file may hold one report or a list of them."""
    reports: dict[str, NodeCheck] = {}
    for path in paths:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise Day2Error(f"--node-check {path}: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise Day2Error(f"--node-check {path}: not JSON ({error.msg} at line {error.lineno})") from None
        for item in document if isinstance(document, list) else [document]:
            report = parse_node_check(item, path)
            reports[report.node] = report
    return reports
