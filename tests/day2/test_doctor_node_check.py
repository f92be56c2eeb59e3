"""doctor with node-check's report: the node's own floors stand below the driver pod, and a broken one is named
before any pod floor (a card that never arrived makes the driver pod crash too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.day2.cli_helpers import ROOT, run

DUMP = str(ROOT / "examples" / "day2" / "broken-driver.json")
HEALTHY_DUMP = str(ROOT / "examples" / "day2" / "healthy-pool.json")
NODE = "rke2-worker-dc2-gpu-a"
REPORT = ROOT / "examples" / "day2" / "node-check-dc2.json"
H200 = ROOT / "tests" / "fixtures" / "node_check" / "h200"


def test_the_example_report_is_what_node_check_prints_on_the_h200_fixture() -> None:
    result = run(
        "node-check", "--sysfs-root", str(H200 / "sys"), "--proc-root", str(H200 / "proc"), "--run-root", str(H200),
        "--kernel-log", str(H200 / "dmesg.txt"), "--nvml-json", str(H200 / "nvml.json"), "--expect-id", "10de:2335",
        "--expect-subsystem", "10de:18bf", "--expect-driver", "580.159.04", "--node", NODE, "-o", "json",
    )  # fmt: skip

    assert result.code == 0 and result.err == ""
    assert result.json() == json.loads(REPORT.read_text())


def own_report(tmp_path: Path, **facts: object) -> Any:
    """The example report as dc2's own node would give it: its A1000, by id and NVML name, and its ids."""
    report = json.loads(REPORT.read_text())
    report["facts"]["cards"] = [
        {"address": "0000:01:00.0", "id": "10de:25b0", "subsystem": "10de:1757", "name": "NVIDIA RTX A1000"}
    ]
    report["facts"].update(facts)
    report["floors"][3]["detail"] = "NVML 580.159.04: NVIDIA RTX A1000 at 0000:01:00.0: pass-through, persistence on"
    return report


def written(tmp_path: Path, report: object) -> str:
    path = tmp_path / "nc.json"
    path.write_text(json.dumps(report))
    return str(path)


def test_healthy_node_floors_stand_below_the_driver_pod_which_stays_the_first_broken(tmp_path: Path) -> None:
    result = run("doctor", NODE, "--from", DUMP, "--node-check", written(tmp_path, own_report(tmp_path)), "-o", "json")
    names = [f["name"] for f in result.json()["floors"]]

    assert result.code == 1
    assert names.index("taint") < names.index("node:pci") < names.index("node:health") < names.index("driver")
    assert result.json()["firstBroken"] == "driver"


def test_a_broken_node_floor_is_named_before_the_driver_pod_it_breaks(tmp_path: Path) -> None:
    report = own_report(tmp_path)
    report["floors"][2] = {"name": "driver", "ok": False, "detail": "0000:00:06.0 is bound to vfio-pci inside the VM"}
    report["floors"][3:] = [
        {"name": n, "ok": None, "detail": "not checked: a floor below is broken"} for n in ("nvml", "health")
    ]
    report["firstBroken"] = "driver"
    report["fix"] = {"traps": [], "command": "vfio-pci belongs on the Proxmox host, not in the guest"}

    result = run("doctor", NODE, "--from", DUMP, "--node-check", written(tmp_path, report), "-o", "json")
    document = result.json()

    assert result.code == 1
    assert document["firstBroken"] == "node:driver"
    assert document["fix"] == {"traps": [], "command": "vfio-pci belongs on the Proxmox host, not in the guest"}
    floors = {f["name"]: f["ok"] for f in document["floors"]}
    assert floors["driver"] is None and floors["smoke-test"] is None


def test_the_h200_capture_under_an_a1000_node_is_refused_as_another_machines_report() -> None:
    result = run("doctor", NODE, "--from", DUMP, "--node-check", str(REPORT), "-o", "json")
    floors = {f["name"]: f for f in result.json()["floors"]}

    assert result.code == 1 and result.json()["firstBroken"] == "node:pci"
    assert floors["node:pci"]["ok"] is False
    assert "the report found NVIDIA H200, but GPU Feature Discovery labelled" in floors["node:pci"]["detail"]
    assert (
        "nvidia.com/gpu.product=NVIDIA-RTX-A1000-SHARED: the report is from another machine"
        in floors["node:pci"]["detail"]
    )
    assert floors["node:driver"]["ok"] is None and floors["node:health"]["ok"] is None


def test_with_the_stack_a_report_of_other_cards_breaks_pci_and_of_another_driver_breaks_driver(tmp_path: Path) -> None:
    report = own_report(tmp_path)
    report["facts"]["cards"][0]["id"] = "10de:2531"  # not the stack's card, though NVML's name is the label's
    result = run(
        "doctor", NODE, "--from", DUMP, "--node-check", written(tmp_path, report), "--stack", "prod", "-o", "json"
    )
    floors = {f["name"]: f for f in result.json()["floors"]}

    assert result.json()["firstBroken"] == "node:pci"
    assert (
        "the report found 10de:2531, the stack passes 10de:25b0 to rke2-worker-dc2-gpu-a"
        in floors["node:pci"]["detail"]
    )
    # prod pins 595.91.07; the report ran on 580.159.04.
    assert floors["node:driver"]["ok"] is False
    assert "the report's driver 580.159.04 is not the stack's pin 595.91.07" in floors["node:driver"]["detail"]


def test_a_report_whose_machine_id_is_not_the_nodes_is_another_machines(tmp_path: Path) -> None:
    dump = json.loads(Path(DUMP).read_text())
    node = next(i for i in dump["items"] if i["kind"] == "Node" and i["metadata"]["name"] == NODE)
    report = own_report(tmp_path, machineId="00000000000000000000000000000001")

    result = run("doctor", NODE, "--from", DUMP, "--node-check", written(tmp_path, report), "-o", "json")
    pci = next(f for f in result.json()["floors"] if f["name"] == "node:pci")

    assert pci["ok"] is False
    assert (
        f"another machine (machine-id 00000000000000000000000000000001, the Node has "
        f"{node['status']['nodeInfo']['machineID']})"
    ) in pci["detail"]


def test_a_report_from_an_earlier_boot_of_the_same_node_is_read_with_a_note(tmp_path: Path) -> None:
    dump = json.loads(Path(DUMP).read_text())
    node = next(i for i in dump["items"] if i["kind"] == "Node" and i["metadata"]["name"] == NODE)
    info = node["status"]["nodeInfo"]
    report = own_report(tmp_path, machineId=info["machineID"], bootId="an-earlier-boot")

    result = run("doctor", NODE, "--from", DUMP, "--node-check", written(tmp_path, report), "-o", "json")
    pci = next(f for f in result.json()["floors"] if f["name"] == "node:pci")

    assert pci["ok"] is True and "note: the report is from an earlier boot" in pci["detail"]


def test_a_report_written_before_node_check_recorded_its_facts_is_rechecked_from_its_words() -> None:
    report = json.loads(REPORT.read_text())
    del report["facts"]
    from day2.doctor.node_report import parse_node_check

    parsed = parse_node_check(report, "old.json")

    assert parsed.cards == ("10de:2335",) and parsed.driver == "580.159.04" and parsed.names == ("NVIDIA H200",)


def test_without_node_check_doctor_prints_what_it_always_did() -> None:
    result = run("doctor", NODE, "--from", DUMP, "-o", "json")

    assert not any(f["name"].startswith("node:") for f in result.json()["floors"])


def test_a_report_of_a_node_doctor_does_not_check_is_a_usage_error(tmp_path: Path) -> None:
    report = json.loads(REPORT.read_text())
    report["node"] = "rke2-worker-dc9-gpu-a"
    path = tmp_path / "nc.json"
    path.write_text(json.dumps(report))

    result = run("doctor", NODE, "--from", DUMP, "--node-check", str(path))

    assert result.code == 2
    assert "a report of rke2-worker-dc9-gpu-a, which doctor does not check" in result.err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[]x", "not JSON"),
        ('{"node": "n"}', "no floors list"),
        ('{"node": "n", "floors": [{"name": "bios"}]}', "not one of"),
    ],
)
def test_a_file_that_is_not_node_checks_json_is_refused_in_one_line(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "nc.json"
    path.write_text(content)

    result = run("doctor", NODE, "--from", HEALTHY_DUMP, "--node-check", str(path))

    assert result.code == 2 and words in result.err and result.err.count("\n") == 1
