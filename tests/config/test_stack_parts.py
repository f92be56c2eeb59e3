"""StackParts (what the rules across keys read, config/stack_parts.py) follows StackConfig: every key of the stack
is either a part the rules read, under the name this table gives it, or named here as one no rule reads, with why.
A new key in StackConfig fails this test until it is placed (FIELD-REVIEW-6 item 6: a key added to the config and
forgotten in the parts is a rule that silently never runs)."""

from __future__ import annotations

import dataclasses

from components.stack_check import validate_stack
from config.stack import StackConfig
from config.stack_parts import StackParts, parts_of
from offline.runner import read_stack_file

# StackConfig field -> the StackParts fields it becomes.
AS_PARTS: dict[str, tuple[str, ...]] = {
    "air_gapped": ("air_gapped",),
    "apt_mirror": ("apt_mirror",),
    "failure_domains": ("domains",),
    "gpu_operator": ("operator", "operator_namespace"),
    "gpu_quotas": ("quotas",),
    "kyverno": ("kyverno",),
    "monitoring": ("monitoring",),
    "proxmox": ("proxmox",),
    "reclaim": ("reclaim",),
    "proxy": ("proxy",),
    "registry_mirrors": ("registry_mirrors",),
    "repair": ("repair",),
    "rke2": ("rke2",),
    "rollout": ("rollout",),
    "sharing_profiles": ("profiles",),
    "smoke_test": ("smoke", "smoke_image", "smoke_namespace"),
    "trusted_ca": ("trusted_ca",),
}
# Keys no rule across keys reads, and why.
NOT_READ: dict[str, str] = {
    "kubernetes": "the cluster's address: checked by the cluster preflight against the live API, not by a rule",
    "preflight": "switches the preflights on or off; nothing to check across keys",
}
# Parts that are the rules' own bookkeeping, not a key.
BOOKKEEPING = {"unknown"}


def test_every_stack_key_is_a_part_the_rules_read_or_named_as_one_they_do_not() -> None:
    assert set(StackConfig.model_fields) == set(AS_PARTS) | set(NOT_READ)
    assert not set(AS_PARTS) & set(NOT_READ)


def test_every_part_comes_from_a_stack_key() -> None:
    parts = {f.name for f in dataclasses.fields(StackParts)}
    assert parts == {p for names in AS_PARTS.values() for p in names} | BOOKKEEPING


def test_a_stack_that_parses_fills_every_part_it_has() -> None:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    parts = parts_of(validate_stack(raw))
    for key, names in AS_PARTS.items():
        for name in names:
            if name in ("apt_mirror", "trusted_ca", "proxy", "registry_mirrors", "air_gapped"):
                continue  # prod sets none of these: None is what they are
            assert getattr(parts, name) not in (None, {}, []), (key, name)
