"""doctor with node-check's report: the node's own floors stand below the driver pod, and a broken one is named
before any pod floor (a card that never arrived makes the driver pod crash too)."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_healthy_node_floors_stand_below_the_driver_pod_which_stays_the_first_broken() -> None:
    result = run("doctor", NODE, "--from", DUMP, "--node-check", str(REPORT), "-o", "json")
    names = [f["name"] for f in result.json()["floors"]]

    assert result.code == 1
    assert names.index("taint") < names.index("node:pci") < names.index("node:health") < names.index("driver")
    assert result.json()["firstBroken"] == "driver"


def test_a_broken_node_floor_is_named_before_the_driver_pod_it_breaks(tmp_path: Path) -> None:
    report = json.loads(REPORT.read_text())
    report["floors"][2] = {"name": "driver", "ok": False, "detail": "0000:00:06.0 is bound to vfio-pci inside the VM"}
    report["floors"][3:] = [
        {"name": n, "ok": None, "detail": "not checked: a floor below is broken"} for n in ("nvml", "health")
    ]
    report["firstBroken"] = "driver"
    report["fix"] = {"traps": [], "command": "vfio-pci belongs on the Proxmox host, not in the guest"}
    path = tmp_path / "nc.json"
    path.write_text(json.dumps(report))

    result = run("doctor", NODE, "--from", DUMP, "--node-check", str(path), "-o", "json")
    document = result.json()

    assert result.code == 1
    assert document["firstBroken"] == "node:driver"
    assert document["fix"] == {"traps": [], "command": "vfio-pci belongs on the Proxmox host, not in the guest"}
    floors = {f["name"]: f["ok"] for f in document["floors"]}
    assert floors["driver"] is None and floors["smoke-test"] is None


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
