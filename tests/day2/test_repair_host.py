"""`gpu-pool repair` reads the host before it stops anything (FIELD-REVIEW-5 WRONG-4/5, issue 36 item 5): the VM's
lock, HA state and status from `GET /cluster/resources?type=vm` and the card in the host's own list, `GET
/nodes/<proxmoxNode>/hardware/pci`; saved with pvesh for a dry run (`--proxmox-from DIR`), or from the API."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.day2.cli_helpers import ROOT
from tests.day2.test_repair_cli import NODE, lab_with_proxmox_at, repair

SAVED = ROOT / "examples" / "day2" / "proxmox-h200-lab"
TOKEN = "root@pam!gpu-pool=0b7c4c1e-not-a-real-token"


def saved(tmp_path: Path, guests: Callable[[list[dict[str, Any]]], None] | None = None, pci: Any = None) -> Path:
    """The example answers in a folder of their own, edited."""
    folder = tmp_path / "proxmox"
    folder.mkdir(exist_ok=True)
    resources = json.loads((SAVED / "cluster-resources.json").read_text())
    if guests:
        guests(resources)
    (folder / "cluster-resources.json").write_text(json.dumps(resources))
    devices = json.loads((SAVED / "pve-dc2-pci.json").read_text())
    (folder / "pve-dc2-pci.json").write_text(json.dumps(devices if pci is None else pci(devices)))
    return folder


def vm(entry: dict[str, Any]) -> Callable[[list[dict[str, Any]]], None]:
    def edit(resources: list[dict[str, Any]]) -> None:
        next(r for r in resources if r["vmid"] == 4201).update(entry)

    return edit


def test_the_example_answers_pass_and_the_plan_says_the_vm_was_checked() -> None:
    result = repair("--proxmox-from", str(SAVED))

    assert result.code == 0, result.err
    assert f"    the VM: VM 4201 on pve-dc2 is {NODE} in Proxmox (saved in {SAVED})" in result.out.splitlines()


def test_a_card_the_host_lost_is_no_power_cycle_but_the_hosts_to_reset_exit_1(tmp_path: Path) -> None:
    """WRONG-4: Xid 79 with the card gone from the host's list; the power cycle would have left a stopped VM."""
    folder = saved(tmp_path, pci=lambda devices: [d for d in devices if d["id"] != "0000:41:00.0"])

    result = repair("--proxmox-from", str(folder), "-o", "json")

    assert result.code == 1, result.err
    document = result.json()
    assert document["repair"] is False and document["steps"] == []
    assert document["reason"].startswith("the host pve-dc2 no longer lists the card at 0000:41:00")
    assert "Proxmox would refuse to start the VM (qemu-server: no pci device info)" in document["reason"]
    assert "echo 1 > /sys/bus/pci/devices/0000:41:00.0/remove; echo 1 > /sys/bus/pci/rescan" in document["reason"]


def test_another_card_where_the_stacks_was_is_a_mapping_or_hardware_change_naming_both_ids_exit_1(
    tmp_path: Path,
) -> None:
    def swapped(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        devices[0].update(device="0x2331", subsystem_device="0x1626", device_name="GH100 [H100 PCIe]")
        return devices

    result = repair("--proxmox-from", str(saved(tmp_path, pci=swapped)))

    assert result.code == 1
    assert "the host pve-dc2 has a device of another model at 0000:41:00: 10de:2331 (subsystem 10de:1626)" in result.out
    assert "gpu-pool:failureDomains[dc2].gpu names 10de:2335 (subsystem 10de:18bf)" in result.out
    assert "a mapping or hardware change that a power cycle does not fix" in result.out


def test_the_stacks_card_at_another_address_is_a_moved_card_not_a_lost_one_exit_1(tmp_path: Path) -> None:
    """The expected model in another slot is a mapping change: no power cycle brings it back to its address."""

    def moved(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        devices[0].update(id="0000:42:00.0")
        return devices

    result = repair("--proxmox-from", str(saved(tmp_path, pci=moved)), "-o", "json")

    assert result.code == 1, result.err
    reason = result.json()["reason"]
    assert reason.startswith("the host pve-dc2 has no device at 0000:41:00 but the expected model at another address")
    assert "10de:2335 at 0000:42:00.0" in reason and "a power cycle does not fix" in reason


def test_a_locked_vm_is_refused_before_anything_stops_exit_2(tmp_path: Path) -> None:
    """WRONG-5: during the nightly backup the stop was refused after the budget was charged."""
    result = repair("--proxmox-from", str(saved(tmp_path, vm({"lock": "backup"}))))

    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"gpu-pool: repair {NODE} refused: VM 4201 is locked (backup) in Proxmox")
    assert result.err.count("\n") == 1


def test_an_ha_managed_vm_is_refused_unless_the_stack_allows_it(tmp_path: Path) -> None:
    folder = saved(tmp_path, vm({"hastate": "started"}))

    refused = repair("--proxmox-from", str(folder))

    assert refused.code == 2
    assert "VM 4201 is HA-managed in Proxmox (hastate started)" in refused.err
    assert "gpu-pool:repair.allowHaManaged: true" in refused.err

    import yaml

    document = yaml.safe_load((ROOT / "examples" / "day2" / "Pulumi.h200-lab.yaml").read_text())
    document["config"]["gpu-pool:repair"] = {"allowHaManaged": True}
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "Pulumi.h200-lab.yaml").write_text(yaml.safe_dump(document, sort_keys=False))

    allowed = repair("--proxmox-from", str(folder), stack=("--stack", "h200-lab", "--stack-dir", str(stack)))

    assert allowed.code == 0, allowed.err
    assert "VM 4201 is HA-managed (started): its stop and start are HA requests" in allowed.out
    assert "checks afterwards that it runs on pve-dc2" in allowed.out


def test_a_vm_that_is_not_running_is_said_and_only_started(tmp_path: Path) -> None:
    result = repair("--proxmox-from", str(saved(tmp_path, vm({"status": "stopped"}))))

    assert result.code == 0
    assert "VM 4201 is stopped in Proxmox: --yes only starts it (nothing to stop, no power cycle charged)" in (
        result.out
    )


def test_saved_answers_are_a_dry_run_only() -> None:
    result = repair("--proxmox-from", str(SAVED), "--yes")

    assert (result.code, result.out) == (2, "")
    assert "--yes repairs the live cluster: drop --from (a dump is for a look at the plan) and --proxmox-from" in (
        result.err
    )


def test_a_missing_saved_answer_names_the_file_and_the_pvesh_command(tmp_path: Path) -> None:
    folder = saved(tmp_path)
    (folder / "pve-dc2-pci.json").unlink()

    result = repair("--proxmox-from", str(folder))

    assert result.code == 2
    assert "cannot read pve-dc2-pci.json" in result.err
    assert "pvesh get /nodes/pve-dc2/hardware/pci --output-format json" in result.err


# ---------------------------------------------------------------------------------------------------- the API


@contextmanager
def proxmox(tmp_path: Path, refuse: dict[str, tuple[int, str]]) -> Iterator[str]:
    """The e2e tier's Proxmox stand-in (tests/e2e/proxmox_api.py) over loopback HTTPS, with the lab's VMs and the
    H200 host, refusing the paths in `refuse` as pveproxy does (status line = PVE's message)."""
    from tests.e2e.proxmox_api import ApiError, PciFunction, ProxmoxState, Vm
    from tests.e2e.proxmox_standin import serving_api

    h200 = PciFunction("0000:41:00.0", "0x030200", "0x10de", "0x2335", "0x10de", "0x18bf", 40, "GH100 [H200]")
    state = ProxmoxState({"pve-dc1": [], "pve-dc2": [h200], "pve-dc3": []}, tmp_path)
    for vmid, node in ((4101, "pve-dc1"), (4201, "pve-dc2"), (4301, "pve-dc3")):
        state.vms[vmid] = Vm(vmid, node, {"name": f"rke2-worker-{node[4:]}-gpu-a"}, status="running")
    handle = state.handle

    def refusing(method: str, path: str, form: dict[str, list[str]]) -> Any:
        for suffix, (code, message) in refuse.items():
            if path.endswith(suffix):
                raise ApiError(code, message)
        return handle(method, path, form)

    state.handle = refusing  # type: ignore[method-assign]
    with serving_api(tmp_path, state, TOKEN) as endpoint:
        yield endpoint


@pytest.mark.parametrize(
    ("refuse", "said"),
    [
        ({}, ""),
        (
            {"/hardware/pci": (403, "Permission check failed (/nodes/pve-dc2, Sys.Audit)")},
            "refused to list pve-dc2's PCI devices: Proxmox refused GET /nodes/pve-dc2/hardware/pci: 403 Permission "
            "check failed (/nodes/pve-dc2, Sys.Audit) (the token lacks the privilege",
        ),
    ],
    ids=["the host answers", "the token may not read the host"],
)
def test_the_api_is_read_for_the_vm_and_the_card_and_a_refusal_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse: dict[str, tuple[int, str]], said: str
) -> None:
    monkeypatch.setenv("GPU_POOL_SECRET_PROXMOXAPITOKEN", TOKEN)
    with proxmox(tmp_path, refuse) as endpoint:
        result = repair(stack=lab_with_proxmox_at(tmp_path, endpoint))

    if not said:
        assert result.code == 0, result.err
        assert f"    the VM: VM 4201 on pve-dc2 is {NODE} in Proxmox" in result.out.splitlines()
    else:
        assert (result.code, result.out) == (2, "")
        assert said in result.err and result.err.count("\n") == 1 and "Traceback" not in result.err
    assert TOKEN not in result.out + result.err
