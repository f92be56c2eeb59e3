"""`GET /access/permissions` read two ways: what the stack's credential lacks to create the repair token, and what
the watcher's token holds beyond its plan (the watcher refuses on any)."""

from __future__ import annotations

from typing import Any

from components.stack_check import validate_stack
from components.unattended.credential import credential_plan
from components.unattended.permissions import beyond_the_role, effective, stack_credential_missing
from offline.runner import read_stack_file


def plan() -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    cfg = validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}})
    return credential_plan(cfg, "prod")


def exactly_the_plan() -> dict[str, dict[str, int]]:
    p = plan()
    answer: dict[str, dict[str, int]] = {}
    for row in p.acls:
        role = p.vm_role if row.role_id == p.vm_role.role_id else p.mapping_role
        answer.setdefault(row.path, {}).update({priv: 0 for priv in role.privileges})
    return answer


def test_a_token_holding_exactly_its_plan_passes() -> None:
    assert beyond_the_role(exactly_the_plan(), plan()) == []


def test_a_token_widened_by_hand_is_named_path_by_path() -> None:
    widened = exactly_the_plan()
    widened["/vms/4101"]["VM.Config.Disk"] = 0
    widened["/"] = {"Sys.Audit": 1}

    problems = beyond_the_role(widened, plan())

    assert "VM.Config.Disk on /vms/4101" in problems
    assert "Sys.Audit on /" in problems and any("propagated" in p and " on /" in p for p in problems)


def test_the_stacks_credential_with_its_documented_role_on_root_lacks_nothing() -> None:
    privileges = "VM.Audit VM.PowerMgmt Mapping.Audit Mapping.Modify Sys.Modify User.Modify Permissions.Modify"
    answer = {"/": dict.fromkeys(privileges.split(), 1)}

    assert stack_credential_missing(answer, plan()) == []


def test_a_stack_credential_without_the_new_privileges_is_told_each_one_and_where() -> None:
    answer = {"/": dict.fromkeys(["VM.Audit", "VM.PowerMgmt", "Mapping.Modify"], 1)}

    missing = "\n".join(stack_credential_missing(answer, plan()))

    assert "Sys.Modify on /access" in missing and "User.Modify on /access/groups" in missing
    assert "Permissions.Modify on /vms/4101" in missing and "Mapping.Audit on /mapping/pci/gpu-dc1" in missing


def test_a_grant_that_does_not_propagate_does_not_reach_below_its_path() -> None:
    answer = {"/vms": {"VM.Audit": 0}, "/": {"Sys.Audit": 1}}

    assert effective(answer, "/vms/4101") == {"Sys.Audit"}
    assert effective(answer, "/vms") == {"VM.Audit"}
