"""`claims` and `doctor` on a node with two cards: the slots of every card are expected, a missing card is caught."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from day2.doctor.walk import diagnose_all
from day2.objects import Snapshot
from day2.pool import load_stack
from tests.day2.cli_helpers import run, write_dump
from tests.day2.k8s_objects import NOW, dump
from tests.day2.scenarios import NODES, gpu_node, healthy_pool, replaced

ROOT = Path(__file__).resolve().parents[2]


def two_card_stack(folder: Path) -> Path:
    """Pulumi.prod.yaml with a second RTX A1000 in dc1's host (a1000-x4: 8 slots there)."""
    document: dict[str, Any] = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    domain = document["config"]["gpu-pool:failureDomains"][0]
    first = domain.pop("gpu")
    domain["gpus"] = [first, {**copy.deepcopy(first), "pciAddress": "0000:02:00", "iommuGroup": 15}]
    (folder / "Pulumi.twocards.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    return folder


def dc1_advertising(slots: str, *, count: str | None = None) -> list[dict[str, Any]]:
    node = gpu_node("dc1", "a1000-x4", gpus=slots)
    if count is not None:
        node["metadata"]["labels"]["nvidia.com/gpu.count"] = count
    return replaced(healthy_pool(), node)


def snapshot_of(objects: list[dict[str, Any]]) -> Snapshot:
    return Snapshot.from_items(dump(objects)["items"])


def test_the_stack_expects_the_slots_of_both_cards_of_a_two_card_domain(tmp_path: Path) -> None:
    facts = load_stack("twocards", two_card_stack(tmp_path))
    assert facts.expected_slots() == {NODES["dc1"]: 8, NODES["dc2"]: 4, NODES["dc3"]: 1}


def test_doctor_passes_a_two_card_node_that_advertises_both_cards(tmp_path: Path) -> None:
    facts = load_stack("twocards", two_card_stack(tmp_path))
    diagnoses = diagnose_all(snapshot_of(dc1_advertising("8", count="2")), facts)
    assert all(d.healthy for d in diagnoses), [(d.node, d.first_broken) for d in diagnoses]


def test_doctor_catches_a_two_card_node_that_advertises_one_card(tmp_path: Path) -> None:
    facts = load_stack("twocards", two_card_stack(tmp_path))
    dc1 = next(d for d in diagnose_all(snapshot_of(dc1_advertising("4", count="1")), facts) if d.node == NODES["dc1"])
    assert dc1.first_broken == "gpu-capacity"
    detail = next(f.detail for f in dc1.floors if f.name == "gpu-capacity")
    assert "allocatable nvidia.com/gpu is 4, profile a1000-x4 gives 8" in detail


def test_without_a_stack_doctor_expects_slots_per_card_times_the_cards_gpu_feature_discovery_counted() -> None:
    from day2.pool import PoolFacts

    diagnoses = diagnose_all(snapshot_of(dc1_advertising("8", count="2")), PoolFacts())
    assert all(d.healthy for d in diagnoses), [(d.node, d.first_broken) for d in diagnoses]


def test_claims_with_the_stack_shows_eight_expected_slots_on_the_two_card_node(tmp_path: Path) -> None:
    folder = two_card_stack(tmp_path)
    source = write_dump(tmp_path / "dump.json", dc1_advertising("8", count="2"))
    result = run(
        "claims",
        "--from",
        str(source),
        "--stack",
        "twocards",
        "--stack-dir",
        str(folder),
        "-o",
        "json",
        "--now",
        NOW.isoformat(),
    )
    assert result.code == 0, result.err
    nodes = {n["name"]: n for n in result.json()["nodes"]}
    assert nodes[NODES["dc1"]]["allocatable"] == 8 and nodes[NODES["dc1"]]["expected"] == 8
