"""The values a user writes for a reason pydantic cannot know get the project's own message, naming the key, what
the value means and the fix, never pydantic's "Input should be ..."."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from components.stack_check import validate_stack
from config.errors import ConfigError
from offline.runner import read_stack_file

Edit = Callable[[dict[str, Any]], None]


def _minimal() -> dict[str, Any]:
    return {k.removeprefix("gpu-pool:"): v for k, v in copy.deepcopy(read_stack_file("minimal")).items()}


def _first_card(raw: dict[str, Any]) -> dict[str, Any]:
    card: dict[str, Any] = raw["failureDomains"][0]["gpus"][0]
    return card


CASES: list[tuple[str, Edit, str]] = [
    (
        "iommuGroup -1",
        lambda raw: _first_card(raw).update(iommuGroup=-1),
        "gpu-pool:failureDomains[host-a].gpus[0].iommuGroup: is -1, which is what Proxmox reports when IOMMU is off",
    ),
    (
        "no failure domains",
        lambda raw: raw.update(failureDomains=[]),
        "gpu-pool:failureDomains: is empty: list at least one failure domain",
    ),
    (
        "a domain with an empty card list",
        lambda raw: raw["failureDomains"][0].update(gpus=[]),
        "gpu-pool:failureDomains[host-a].gpus: is empty: list each card the VM gets",
    ),
    (
        "cores 0",
        lambda raw: raw["failureDomains"][0].update(cores=0),
        "gpu-pool:failureDomains[host-a].cores: is 0: a VM needs at least 1 vCPU",
    ),
    (
        "maxPerDay 0",
        lambda raw: raw.update(repair={"maxPerDay": 0}),
        "gpu-pool:repair.maxPerDay: is 0, which would let `gpu-pool repair` never power-cycle a VM: give 1 to 24",
    ),
    (
        "sharing given as a list",
        lambda raw: raw["failureDomains"][0].update(sharing=["shared-x2"]),
        "gpu-pool:failureDomains[host-a].sharing: names one sharing profile, not a list of them",
    ),
]


@pytest.mark.parametrize(("case", "edit", "said"), CASES, ids=[c[0] for c in CASES])
def test_a_value_pydantic_would_word_for_itself_gets_the_projects_message(case: str, edit: Edit, said: str) -> None:
    raw = _minimal()
    edit(raw)

    with pytest.raises(ConfigError) as caught:
        validate_stack(raw)

    messages = caught.value.messages
    assert any(m.startswith(said) for m in messages), messages
    assert not any("Input should" in m or "List should" in m for m in messages)
