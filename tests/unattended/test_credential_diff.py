"""`make diff` shows the unattended repair's credential: each role's privileges and each ACL's path when it is
turned on, and a danger on any role or ACL that grants the token more than the watcher's calls need."""

from __future__ import annotations

import copy
from typing import Any

from components.stack_check import validate_stack
from knowledge.proxmox_access import wider_than_the_watcher_needs
from offline.plan_diff import REPAIR_ACL, REPAIR_ROLE, compare
from offline.recording import RecordingMonitor, Registration
from offline.runner import read_stack_file
from tests.unattended.registered import register_unattended


def prod() -> dict[str, Any]:
    return copy.deepcopy(read_stack_file("prod"))


def test_the_components_roles_and_acls_show_their_privileges_and_every_acl_path_without_a_danger(
    monitor: RecordingMonitor,
) -> None:
    # make diff's comparison of each registration, on the component the program registers.
    cfg = validate_stack(
        {k.split(":", 1)[1]: v for k, v in prod().items()}
        | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}}
    )
    changes = [compare(None, r) for r in register_unattended(monitor, cfg).registrations]
    info = "\n".join(line for change in changes for line in change.info)

    assert "VM.Audit, VM.PowerMgmt" in info and "Mapping.Audit" in info
    assert "/vms/4101" in info and "/mapping/pci/gpu-dc1" in info
    assert not [d for c in changes if c.type in (REPAIR_ROLE, REPAIR_ACL) for d in c.dangers]


def _registration(type_: str, inputs: dict[str, Any]) -> Registration:
    return Registration(f"urn:{type_}", type_, "unattended-repair-x", "", True, False, "", [], {}, inputs)


def test_a_role_or_acl_wider_than_the_watcher_needs_is_a_danger_naming_what_widens_it() -> None:
    role = compare(None, _registration(REPAIR_ROLE, {"roleId": "r", "privileges": ["VM.Audit", "Sys.Audit"]}))
    on_root = compare(None, _registration(REPAIR_ACL, {"roleId": "r", "path": "/", "propagate": False}))
    on_vms = compare(None, _registration(REPAIR_ACL, {"roleId": "r", "path": "/vms", "propagate": True}))

    assert any("Sys.Audit" in d for d in role.dangers)
    assert any("an ACL on /" in d for d in on_root.dangers)
    assert len(on_vms.dangers) == 2  # a parent path, and propagated


def test_one_vm_or_one_mapping_without_propagation_is_what_the_watcher_needs() -> None:
    assert wider_than_the_watcher_needs(["VM.PowerMgmt", "VM.Audit"], "/vms/4101", False) == []
    assert wider_than_the_watcher_needs(["Mapping.Audit"], "/mapping/pci/gpu-dc1", False) == []
    assert wider_than_the_watcher_needs(None, "/vms/4101/x", False) != []


def test_the_offline_preview_shows_the_tokens_privileges_and_paths_and_the_watchers_access(
    tmp_path: Any, capsys: Any
) -> None:
    import yaml

    from offline.preview import main
    from tests.day2.cli_helpers import ROOT

    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    document["config"]["gpu-pool:repair"] = {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")

    code = main(["--stack", "prod", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet"])

    out = capsys.readouterr().out
    assert code == 0
    assert "/vms/4101 -> GpuPoolRepairVm-prod (dc1)" in out and "Mapping.Audit" in out
    assert "Watcher: Deployment gpu-pool-repair/gpu-pool-repair (1 replica, Recreate" in out
    assert "the drain: list pods (any namespace); create pods/eviction (any namespace)" in out
    assert "get nodes (Nodes rke2-worker-dc1-gpu-a" in out
    manifests = tmp_path / "out" / "manifests"
    assert (manifests / "deployment-gpu-pool-repair-gpu-pool-repair.yaml").is_file()
    assert (manifests / "role-gpu-pool-node-check-gpu-pool-repair.yaml").is_file()
