"""`gpu-pool:repair.unattended`: off by default, refused without the health check it acts on (naming both keys),
and every value checked with the key named, through the real program so nothing is registered on a refusal."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from config.repair import POWER_CYCLE_FLOORS, RepairConfig, UnattendedConfig
from config.window import window_hours
from day2.node_check.floors import FLOOR_NAMES
from tests.config.refusal import Run, refused


def test_unattended_repair_is_off_by_default_and_runs_only_what_gpu_pool_repair_would() -> None:
    unattended = RepairConfig().unattended

    assert unattended.enabled is False
    assert unattended.decisions == list(POWER_CYCLE_FLOORS)
    assert (unattended.breaker_failures, unattended.breaker_window) == (2, "24h")


def test_the_decisions_are_node_check_floors_whose_fix_is_a_power_cycle() -> None:
    # node-check's floors are day2/node_check/floors.py FLOORS; doctor names them node:<floor>.
    assert {f.removeprefix("node:") for f in POWER_CYCLE_FLOORS} <= set(FLOOR_NAMES)
    assert "node:driver" not in POWER_CYCLE_FLOORS  # a driver that is not the pin is a stack change, not a reset


def test_enabling_it_without_the_health_check_is_refused_naming_both_keys(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any
) -> None:
    prod_config["gpu-pool:repair"] = {"unattended": {"enabled": True}}

    message = refused(run_stack_program, prod_config, monitor)

    assert "repair.unattended.enabled" in message and "repair.healthCheck.enabled" in message


@pytest.mark.parametrize(
    ("value", "key", "fragment"),
    [
        ({"breakerWindow": "1w"}, "breakerWindow", "24h, 72h or 7d"),
        ({"breakerWindow": "0h"}, "breakerWindow", "whole hours or days"),
        ({"breakerWindow": "91d"}, "breakerWindow", "longer than 90d"),
        ({"breakerFailures": 0}, "breakerFailures", "greater than or equal to 1"),
        ({"decisions": ["node:driver"]}, "decisions", "node:pci"),
        ({"decisions": []}, "decisions", "at least 1"),
        ({"decisions": ["node:pci", "node:pci"]}, "decisions", "more than once"),
        ({"image": "python:latest"}, "image", "pinned by tag or digest"),
        ({"namespace": "Repair"}, "namespace", ""),
        ({"tokenGeneration": 0}, "tokenGeneration", "greater than or equal to 1"),
    ],
)
def test_a_bad_unattended_value_is_refused_naming_its_key(value: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as raised:
        UnattendedConfig.model_validate(value)

    assert key in str(raised.value) and fragment in str(raised.value)


def test_the_breaker_window_reads_hours_and_days() -> None:
    assert [window_hours(w) for w in ("24h", "72h", "7d")] == [24, 72, 168]


def test_an_enabled_watcher_with_the_health_check_validates(prod_config: dict[str, Any]) -> None:
    repair = RepairConfig.model_validate(
        {"healthCheck": {"enabled": True}, "unattended": {"enabled": True, "decisions": ["node:pci"]}}
    )

    assert repair.unattended.enabled and repair.unattended.decisions == ["node:pci"]
