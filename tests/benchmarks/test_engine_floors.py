"""The floors of the scaled real-engine bench (benchmarks/engine_floors.py) are what they claim: floor (b) has
prod's resource types and counts, with inputs no larger than prod's and no dependencies; floor (a) as many trivial
commands as prod has custom resources. Checked on prod's own plan and on a generated 10-domain one."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from benchmarks.engine_floors import (
    FLOOR_PROGRAM,
    MINIMAL_INPUTS,
    TRIVIAL_COMMAND,
    UnknownType,
    commands_floor,
    custom_count,
    dependency_edges,
    input_bytes_by_type,
    registration_counts,
    types_floor,
)
from benchmarks.stack_generator import generate_stack_config
from offline.critical_path import PROVIDER_PREFIX
from offline.render import plan
from offline.runner import PROJECT, run_stack


@pytest.fixture(scope="module", params=[None, 10], ids=["prod", "10 domains"])
def prod_plan(request: pytest.FixtureRequest) -> dict[str, Any]:
    config = None if request.param is None else generate_stack_config(request.param)
    return plan(run_stack("prod", config=config), PROJECT, "prod")


def _not_providers(prod: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in prod["resources"] if not r["type"].startswith(PROVIDER_PREFIX)]


def test_floor_b_registers_prods_types_and_counts_under_prods_names(prod_plan: dict[str, Any]) -> None:
    floor = types_floor(prod_plan)
    resources = _not_providers(prod_plan)
    assert registration_counts(floor) == dict(Counter(r["type"] for r in resources))
    assert sorted(name for _, name, _ in floor) == sorted(r["name"] for r in resources)


def test_floor_b_sends_no_more_than_prod_for_any_type(prod_plan: dict[str, Any]) -> None:
    prod_bytes = input_bytes_by_type(prod_plan)
    floor_bytes: Counter[str] = Counter()
    for type_, _, inputs in types_floor(prod_plan):
        floor_bytes[type_] += len(json.dumps(inputs))
    for type_, size in floor_bytes.items():
        assert size <= prod_bytes[type_][1], type_
    # And much less in all: the scripts, manifests and values stay out.
    assert sum(floor_bytes.values()) * 10 < sum(size for _, size in prod_bytes.values())


def test_floor_a_is_one_trivial_command_per_custom_resource_of_prod(prod_plan: dict[str, Any]) -> None:
    floor = commands_floor(prod_plan)
    assert len(floor) == custom_count(prod_plan) > 0
    assert {(type_, json.dumps(inputs)) for type_, _, inputs in floor} == {(TRIVIAL_COMMAND, '{"create": "true"}')}
    assert len({name for _, name, _ in floor}) == len(floor)


def test_prod_has_dependencies_and_the_floors_program_registers_none(prod_plan: dict[str, Any]) -> None:
    assert dependency_edges(prod_plan) > 0
    assert "depends_on" not in FLOOR_PROGRAM and "parent=" not in FLOOR_PROGRAM


def test_a_type_without_minimal_inputs_is_named_with_where_to_add_them() -> None:
    odd = {"resources": [{"type": "proxmoxve:index/containerLegacy:ContainerLegacy", "name": "x", "inputs": {}}]}
    with pytest.raises(UnknownType, match=r"containerLegacy.*MINIMAL_INPUTS"):
        types_floor(odd)
    assert "kubernetes" in MINIMAL_INPUTS
