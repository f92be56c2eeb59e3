"""What the tool reads from a stack file: nodes, profiles, labels, namespaces; problems as one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from day2.errors import Day2Error
from day2.pool import Domain, load_stack

ROOT = Path(__file__).resolve().parents[2]


def test_the_prod_stack_gives_each_domains_node_profile_and_slots() -> None:
    facts = load_stack("prod", ROOT)

    assert facts.domains == (
        Domain("dc1", "rke2-worker-dc1-gpu-a", "a1000-x4", 4, ("10de:25b0",)),
        Domain("dc2", "rke2-worker-dc2-gpu-a", "a1000-x4", 4, ("10de:25b0",)),
        Domain("dc3", "rke2-worker-dc3-gpu-a", "whole", 1, ("10de:25b0",)),
    )
    assert facts.expected_slots() == {
        "rke2-worker-dc1-gpu-a": 4,
        "rke2-worker-dc2-gpu-a": 4,
        "rke2-worker-dc3-gpu-a": 1,
    }
    assert facts.profile_slots == {"a1000-x4": 4, "whole": 1}
    assert (facts.stack, facts.operator_namespace, facts.driver_version) == ("prod", "gpu-operator", "595.91.07")


def test_secrets_and_other_projects_keys_in_the_stack_file_are_ignored(tmp_path: Path) -> None:
    text = (ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8")
    text += "  gpu-pool:rke2Token:\n    secure: AAABAKx0\n  kubernetes:context: elsewhere\n"
    (tmp_path / "Pulumi.lab.yaml").write_text(text, encoding="utf-8")

    assert len(load_stack("lab", tmp_path).domains) == 3


def test_a_stack_that_does_not_validate_is_one_error_naming_the_key(tmp_path: Path) -> None:
    text = (ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8").replace("sharing: whole", "sharing: missing")
    (tmp_path / "Pulumi.lab.yaml").write_text(text, encoding="utf-8")

    with pytest.raises(Day2Error, match=r"gpu-pool:failureDomains\[\w+\]\.sharing: 'missing' is not a defined sharing"):
        load_stack("lab", tmp_path)
