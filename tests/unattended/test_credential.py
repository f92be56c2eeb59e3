"""The unattended repair's Proxmox credential: two roles whose privileges are exactly what the watcher's calls need
(from the endpoint table citing pve-manager and qemu-server), ACLs on the token only, on each GPU domain's VM and
card mapping and nowhere else, never propagated; a privilege-separated token whose secret stays a Pulumi secret
into a Kubernetes Secret only the watcher's ServiceAccount may read. Checked on what the real program registers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components.stack_check import validate_stack
from components.unattended.credential import (
    api_token,
    credential_dangers,
    credential_lines,
    credential_plan,
    privileges_on,
    user_of,
)
from components.unattended.objects import NAME, SECRET_NAME, build_watcher_access
from knowledge.proxmox_access import MAPPING_PATH, WATCHER_CALLS
from offline.recording import Recording, RecordingMonitor, is_secret, reveal
from offline.runner import read_stack_file
from tests.config.refusal import refused
from tests.unattended.registered import register_unattended

ROLE = "proxmoxve:index/roleLegacy:RoleLegacy"
ACL = "proxmoxve:index/acl:Acl"
TOKEN = "proxmoxve:user/token:Token"
SCHEMA = "pulumi-schemas/proxmoxve/8.3.0/schema.json"


def stack(extra: dict[str, Any] | None = None) -> Any:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    repair = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}
    return validate_stack(raw | {"repair": repair} | (extra or {}))


def test_the_roles_grant_power_and_audit_on_vms_and_audit_on_mappings_and_nothing_else() -> None:
    plan = credential_plan(stack(), "prod")

    assert plan.vm_role.privileges == ("VM.Audit", "VM.PowerMgmt")
    assert plan.mapping_role.privileges == ("Mapping.Audit",)
    # Derived from the calls: every privilege a call needs is granted, and every granted one is needed by a call.
    needed = {call.grant for call in WATCHER_CALLS if call.grant}
    assert needed == {p for role in plan.roles for p in role.privileges}


def test_starting_a_vm_with_a_mapped_card_needs_no_mapping_use() -> None:
    start = next(c for c in WATCHER_CALLS if c.api_path.endswith("/status/start"))

    assert start.privileges == ("VM.PowerMgmt",) and "Mapping.Use" not in privileges_on(MAPPING_PATH)
    assert "check_mapping_access" in start.source


def test_each_acl_is_one_domains_vm_or_mapping_without_propagation_and_none_is_on_a_parent_path() -> None:
    cfg = stack()
    plan = credential_plan(cfg, "prod")
    paths = {row.path for row in plan.acls}

    expected = {f"/vms/{d.vm_id}" for d in cfg.failure_domains} | {
        f"/mapping/pci/gpu-{d.name}" for d in cfg.failure_domains
    }
    assert paths == expected
    assert not any(row.propagate for row in plan.acls)
    assert not paths & {"/", "/vms", "/mapping", "/mapping/pci", "/nodes", "/access"}
    assert all(row.role_id == plan.vm_role.role_id for row in plan.acls if row.path.startswith("/vms/"))


def test_a_domain_with_a_raw_passthrough_card_gets_no_grant_and_is_named_as_a_danger() -> None:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    raw["failureDomains"][1]["gpu"]["passthrough"] = "raw"
    cfg = validate_stack(
        raw
        | {"proxmox": raw["proxmox"] | {"auth": "rootPassword"}}
        | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}}
    )
    plan = credential_plan(cfg, "prod")
    dc2 = cfg.failure_domains[1]

    assert dc2.name not in plan.eligible and not any(str(dc2.vm_id) in row.path for row in plan.acls)
    dangers = "\n".join(credential_dangers(cfg, plan))
    assert f"failureDomains[{dc2.name}].gpu" in dangers and "raw id" in dangers
    assert "root@pam" in dangers


def test_the_preview_lines_name_each_role_privilege_and_acl_path() -> None:
    plan = credential_plan(stack(), "prod")
    text = "\n".join(credential_lines(plan))

    assert "VM.Audit, VM.PowerMgmt" in text and "Mapping.Audit" in text
    assert all(row.path in text for row in plan.acls) and "no propagation" in text


@pytest.mark.parametrize(
    ("credential", "user"),
    [("pulumi@pve!gpu-pool=1b2c3d4e-0000-0000-0000-000000000000", "pulumi@pve"), ("a-root-password", "root@pam")],
)
def test_the_token_belongs_to_the_stacks_own_user(credential: str, user: str) -> None:
    assert user_of(credential) == user


def test_the_secret_holds_the_whole_token_whether_the_provider_gives_the_bare_secret_or_the_whole_token() -> None:
    whole = "pulumi@pve!gpu-pool-repair-prod-g1=11111111-2222-3333-4444-555555555555"

    assert api_token("pulumi@pve!gpu-pool-repair-prod-g1", whole) == whole
    assert api_token("pulumi@pve!gpu-pool-repair-prod-g1", whole.split("=", 1)[1]) == whole


def test_raising_the_token_generation_names_a_new_token() -> None:
    first = credential_plan(stack(), "prod").token_name
    raw_next = stack(
        {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True, "tokenGeneration": 2}}}
    )

    assert credential_plan(raw_next, "prod").token_name != first


def _registered(monitor: RecordingMonitor) -> Recording:
    return register_unattended(monitor, stack())


def test_the_program_registers_the_roles_token_and_acls_valid_against_the_providers_schema(
    monitor: RecordingMonitor, upstream: Path
) -> None:
    schema = json.loads((upstream / SCHEMA).read_text(encoding="utf-8"))
    recording = _registered(monitor)

    for type_ in (ROLE, ACL, TOKEN):
        registrations = recording.by_type(type_)
        assert registrations, type_
        resource = schema["resources"][type_]
        for registration in registrations:
            inputs = {k: v for k, v in registration.inputs.items() if not k.startswith("__")}
            assert set(inputs) <= set(resource["inputProperties"]), (type_, set(inputs))
            assert set(resource.get("requiredInputs", [])) <= set(inputs), type_
    assert all(reveal(r.inputs).get("propagate") is False for r in recording.by_type(ACL))
    assert all(reveal(r.inputs)["privilegesSeparation"] is True for r in recording.by_type(TOKEN))
    assert (
        "value" in schema["resources"][TOKEN]["properties"]
        and schema["resources"][TOKEN]["properties"]["value"]["secret"]
    )


def test_the_token_is_replaced_when_its_generation_changes(monitor: RecordingMonitor) -> None:
    token = _registered(monitor).by_type(TOKEN)[0]

    assert "tokenName" in token.replace_on_changes


def test_the_token_reaches_the_cluster_only_as_a_secret_in_a_secret_only_the_watcher_reads(
    monitor: RecordingMonitor,
) -> None:
    recording = _registered(monitor)
    secret = recording.by_type("kubernetes:core/v1:Secret")
    assert len(secret) == 1
    token = secret[0].inputs["stringData"]
    # The whole map or its one value in Pulumi's secret envelope: either way never in clear in state or output.
    assert is_secret(token) or is_secret(token["token"])
    readers = [
        (r.name, rule)
        for r in recording.registrations
        if r.type
        in ("kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
        for rule in reveal(r.inputs).get("rules", [])
        if "secrets" in rule.get("resources", [])
    ]
    assert [rule for _, rule in readers] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET_NAME], "verbs": ["get"]}
    ]
    binding = recording.named("unattended-repair-turn-rolebinding-gpu-pool-repair")
    assert reveal(binding.inputs)["subjects"] == [
        {"kind": "ServiceAccount", "name": NAME, "namespace": "gpu-pool-repair"}
    ]


def test_nothing_of_the_unattended_repair_is_registered_unless_enabled(
    run_stack_program: Any, prod_config: dict[str, Any]
) -> None:
    recording = run_stack_program(prod_config)

    assert not recording.by_type(TOKEN) and not recording.by_type(ACL) and not recording.by_type(ROLE)


def test_the_program_registers_the_token_and_the_watcher_when_enabled(
    run_stack_program: Any, prod_config: dict[str, Any]
) -> None:
    prod_config["gpu-pool:repair"] = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}

    recording = run_stack_program(prod_config)

    assert recording.by_type(TOKEN) and recording.by_type(ACL) and recording.by_type(ROLE)
    (deployment,) = recording.by_type("kubernetes:apps/v1:Deployment")
    assert deployment.name == "unattended-repair-watcher"


def test_enabled_without_the_health_check_is_still_refused_naming_both_keys(
    run_stack_program: Any, prod_config: dict[str, Any], monitor: RecordingMonitor
) -> None:
    prod_config["gpu-pool:repair"] = {"unattended": {"enabled": True}}

    message = refused(run_stack_program, prod_config, monitor)

    assert "repair.unattended.enabled" in message and "repair.healthCheck.enabled" in message


def test_the_watchers_objects_validate_strictly_against_the_kubernetes_schema() -> None:
    version = kubernetes_validate.latest_version()
    for obj in build_watcher_access(stack().repair.unattended):
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("raw_domains", [tuple(i for i in range(3) if mask >> i & 1) for mask in range(8)])
def test_every_mix_of_mapped_and_raw_domains_grants_exactly_the_mapped_ones_vm_and_mapping(
    raw_domains: tuple[int, ...],
) -> None:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    for index in raw_domains:
        raw["failureDomains"][index]["gpu"]["passthrough"] = "raw"
    proxmox = raw["proxmox"] | ({"auth": "rootPassword"} if raw_domains else {})
    repair = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}
    cfg = validate_stack(raw | {"proxmox": proxmox, "repair": repair})
    plan = credential_plan(cfg, "prod")

    mapped = [d for i, d in enumerate(cfg.failure_domains) if i not in raw_domains]
    assert {row.path for row in plan.acls} == {f"/vms/{d.vm_id}" for d in mapped} | {
        f"/mapping/pci/gpu-{d.name}" for d in mapped
    }
    assert {name for name, _ in plan.not_eligible} == {cfg.failure_domains[i].name for i in raw_domains}
    assert not any(row.propagate for row in plan.acls)
    assert (plan.vm_role.privileges, plan.mapping_role.privileges) == (("VM.Audit", "VM.PowerMgmt"), ("Mapping.Audit",))
