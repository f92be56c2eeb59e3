"""node-check on the lent H200's capture: the healthy card passes every floor, and each broken variant derived
from it fails the floor it belongs to, with that floor's fix."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from day2.node_check.command import main

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "node_check" / "h200"
GPU = Path("sys/devices/pci0000:00/0000:00:06.0")
EXPECT = ["--expect-id", "10de:2335", "--expect-subsystem", "10de:18bf", "--expect-driver", "580.159.04"]
VM = ["--proxmox-node", "pve-dc1", "--vm-id", "301"]


def copy(tmp_path: Path) -> Path:
    target = tmp_path / "h200"
    shutil.copytree(H200, target, symlinks=True)
    return target


def check(root: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "--sysfs-root", str(root / "sys"), "--proc-root", str(root / "proc"), "--run-root", str(root),
        "--kernel-log", str(root / "dmesg.txt"), "--nvml-json", str(root / "nvml.json"),
        "--node", "h200-vm", "-o", "json", *EXPECT, *VM, *extra,
    ]  # fmt: skip
    code = main(argv, out=out, err=err)
    return code, json.loads(out.getvalue()) if out.getvalue() else {}, err.getvalue()


def states(report: dict[str, Any]) -> dict[str, bool | None]:
    return {f["name"]: f["ok"] for f in report["floors"]}


def test_the_healthy_h200_passes_every_floor_from_pci_to_health() -> None:
    code, report, err = check(H200)

    assert (code, err) == (0, "")
    assert states(report) == {"pci": True, "link": True, "driver": True, "nvml": True, "health": True}
    assert report["firstBroken"] is None and report["fix"] is None
    detail = {f["name"]: f["detail"] for f in report["floors"]}
    assert (
        "BAR2 256 GiB" in detail["pci"]
        and "10de:2335 (GH100, Hopper) subsystem 10de:18bf 3D controller" in detail["pci"]
    )
    assert detail["link"] == "0000:00:06.0 32.0 GT/s PCIe x16 (= max)"
    assert "580.159.04, open kernel module" in detail["driver"]
    assert "pass-through" in detail["nvml"]


def test_the_json_has_doctors_shape() -> None:
    _, report, _ = check(H200)

    assert list(report) == ["node", "floors", "firstBroken", "fix", "facts"]
    assert [f["name"] for f in report["floors"]] == ["pci", "link", "driver", "nvml", "health"]


def test_the_json_names_what_it_found_for_doctor_to_recheck_and_never_this_machines_ids_for_a_copy() -> None:
    _, report, _ = check(H200)

    assert report["facts"] == {
        "cards": [{"address": "0000:00:06.0", "id": "10de:2335", "subsystem": "10de:18bf", "name": "NVIDIA H200"}],
        "driver": "580.159.04",
        "machineId": None,
        "bootId": None,
    }


def _check_as(root: Path, card: str, driver: str) -> tuple[int, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "--sysfs-root", str(root / "sys"), "--proc-root", str(root / "proc"), "--run-root", str(root),
        "--kernel-log", str(root / "dmesg.txt"), "--node", "h200-vm", "-o", "json", "--expect-id", card,
        "--expect-driver", driver,
    ]  # fmt: skip
    code = main(argv, out=out, err=err)
    return code, json.loads(out.getvalue())


def test_a_blackwell_card_under_the_proprietary_module_breaks_the_driver_floor(tmp_path: Path) -> None:
    root = copy(tmp_path)
    (root / GPU / "device").write_text("0x2b85\n")
    version = root / "proc" / "driver" / "nvidia" / "version"
    version.write_text(version.read_text().replace("Open Kernel Module for x86_64", "x86_64 Kernel Module"))
    code, report = _check_as(root, "10de:2b85", "580.159.04")

    assert code == 1 and report["firstBroken"] == "driver"
    assert (
        "10de:2b85 is a Blackwell card (GB202), which only the open kernel modules drive"
        in report["floors"][2]["detail"]
    )


def test_a_card_the_running_driver_does_not_list_breaks_the_driver_floor(tmp_path: Path) -> None:
    root = copy(tmp_path)
    (root / GPU / "device").write_text("0x2b85\n")  # an RTX 5090 under R580.159: listed since 570.86.16
    (root / "sys" / "module" / "nvidia" / "version").write_text("535.288.01\n")
    code, report = _check_as(root, "10de:2b85", "535.288.01")

    assert code == 1 and report["firstBroken"] == "driver"
    assert (
        "driver 535.288.01 does not list 10de:2b85 (a Blackwell card (GB202)) (first listed in 570.86.16)"
        in (report["floors"][2]["detail"])
    )


def test_an_unassigned_bar_in_sysfs_breaks_the_pci_floor_and_names_the_mmio_window(tmp_path: Path) -> None:
    root = copy(tmp_path)
    resource = root / GPU / "resource"
    lines = resource.read_text().splitlines()
    lines[2] = "0x0000000000000000 0x0000003fffffffff 0x000000002014220c"  # BAR2 with IORESOURCE_UNSET
    resource.write_text("\n".join(lines) + "\n")

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "pci"
    assert "BAR 2" in report["floors"][0]["detail"]
    assert (
        "64-bit MMIO window" in report["fix"]["command"] and "qm stop 301 && qm start 301" in report["fix"]["command"]
    )
    assert states(report)["link"] is None  # not checked above a broken pci floor


def test_a_bar_the_kernel_could_not_assign_is_found_in_the_kernel_log_even_where_sysfs_shows_nothing(
    tmp_path: Path,
) -> None:
    root = copy(tmp_path)
    resource = root / GPU / "resource"
    lines = resource.read_text().splitlines()
    lines[2] = "0x0000000000000000 0x0000000000000000 0x0000000000000000"  # the kernel reset the failed BAR
    resource.write_text("\n".join(lines) + "\n")
    with (root / "dmesg.txt").open("a") as log:
        log.write("[    0.151000] pci 0000:00:06.0: BAR 2 [mem size 0x4000000000 64bit pref]: can't assign; no space\n")
        log.write("[    0.151001] pci 0000:00:06.0: BAR 2 [mem size 0x4000000000 64bit pref]: failed to assign\n")

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "pci"
    assert "BAR 2: can't assign; no space" in report["floors"][0]["detail"]


def test_a_bar_a_later_pass_of_the_kernel_assigned_is_not_a_failure(tmp_path: Path) -> None:
    """pci=realloc or a resized bridge window: the first pass logs the failure, the second places the BAR."""
    root = copy(tmp_path)
    with (root / "dmesg.txt").open("a") as log:
        log.write("[    0.151000] pci 0000:00:06.0: BAR 2 [mem size 0x4000000000 64bit pref]: can't assign; no space\n")
        log.write("[    0.151001] pci 0000:00:06.0: BAR 2 [mem size 0x4000000000 64bit pref]: failed to assign\n")
        log.write("[    0.190000] pci 0000:00:06.0: BAR 2 [mem 0x100000000000-0x103fffffffff 64bit pref]: assigned\n")

    code, report, _ = check(root)

    assert code == 0 and states(report)["pci"] is True


def test_a_card_that_is_not_in_the_vm_breaks_the_pci_floor(tmp_path: Path) -> None:
    code, report, _ = check(H200, "--expect-id", "10de:2335")

    assert code == 1 and report["firstBroken"] == "pci"
    assert "card 2 (10de:2335) is not on the PCI bus" in report["floors"][0]["detail"]
    assert "did not arrive in the VM" in report["fix"]["command"]


def test_another_board_than_the_stacks_subsystem_breaks_the_pci_floor() -> None:
    out = io.StringIO()
    argv = ["--sysfs-root", str(H200 / "sys"), "--expect-id", "10de:2335", "--expect-subsystem", "10de:16e6",
            "--node", "n", "-o", "json"]  # fmt: skip
    code = main(argv, out=out, err=io.StringIO())

    assert (
        code == 1
        and "subsystem 10de:18bf, the stack names 10de:16e6" in json.loads(out.getvalue())["floors"][0]["detail"]
    )


def test_a_narrow_link_breaks_the_link_floor_names_the_cause_and_still_checks_the_floors_above(tmp_path: Path) -> None:
    root = copy(tmp_path)
    (root / GPU / "current_link_width").write_text("8\n")

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "link"
    assert report["floors"][1]["detail"] == "0000:00:06.0 trained x8 of x16"
    assert "slot, riser or seating" in report["fix"]["command"] and "root port" in report["fix"]["command"]
    assert states(report)["driver"] is True and states(report)["health"] is True


def test_a_lower_link_speed_alone_is_not_a_fault_because_gpus_slow_the_link_when_idle(tmp_path: Path) -> None:
    root = copy(tmp_path)
    (root / GPU / "current_link_speed").write_text("2.5 GT/s PCIe\n")

    code, report, _ = check(root)

    assert code == 0 and "compare under load" in report["floors"][1]["detail"]


@pytest.mark.parametrize(
    ("driver", "words"),
    [("vfio-pci", "belongs on the Proxmox host"), ("nouveau", "blacklist nouveau"), (None, "has not loaded")],
)
def test_a_card_not_bound_to_nvidia_breaks_the_driver_floor(tmp_path: Path, driver: str | None, words: str) -> None:
    root = copy(tmp_path)
    link = root / GPU / "driver"
    link.unlink()
    if driver:
        link.symlink_to(f"../../../bus/pci/drivers/{driver}")

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "driver"
    assert words in report["fix"]["command"]


def test_another_driver_version_than_the_pin_breaks_the_driver_floor(tmp_path: Path) -> None:
    code, report, _ = check(H200, "--expect-driver", "580.173.02")

    assert code == 1 and report["firstBroken"] == "driver"
    assert "the stack pins 580.173.02" in report["floors"][2]["detail"]
    assert "gpuOperator.driverVersion" in report["fix"]["command"]


def test_a_branch_pin_accepts_any_release_of_that_branch() -> None:
    code, report, _ = check(H200, "--expect-driver", "580")

    assert code == 0, report


def test_xid_79_in_the_kernel_log_breaks_the_health_floor_and_asks_for_a_power_cycle_of_the_vm(tmp_path: Path) -> None:
    root = copy(tmp_path)
    with (root / "dmesg.txt").open("a") as log:
        log.write(
            "[ 9000.000000] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, "
            "GPU has fallen off the bus.\n"
        )

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "health"
    assert "Xid 79 at 0000:00:06: GPU has fallen off the bus" in report["floors"][4]["detail"]
    assert "power cycle the VM from Proxmox" in report["fix"]["command"]
    assert "qm stop 301 && qm start 301 on Proxmox node pve-dc1" in report["fix"]["command"]


def test_an_application_xid_is_reported_but_does_not_break_the_node(tmp_path: Path) -> None:
    root = copy(tmp_path)
    with (root / "dmesg.txt").open("a") as log:
        log.write("[ 9000.000000] NVRM: Xid (PCI:0000:00:06): 31, pid=4242, name=python3, Ch 00000008, MMU Fault\n")

    code, report, _ = check(root)

    assert code == 0 and "Xid 31" in report["floors"][4]["detail"]


def test_an_xid_on_a_mig_partition_of_the_card_is_still_the_cards_xid(tmp_path: Path) -> None:
    """The driver writes ` GPU-I:nn GPU-CI:nn` into the parenthesis on a MIG-partitioned H200 (kernel_rc.c)."""
    root = copy(tmp_path)
    with (root / "dmesg.txt").open("a") as log:
        log.write(
            "[ 9000.000000] NVRM: Xid (PCI:0000:00:06 GPU-I:05 GPU-CI:01): 95, pid=7194, name=python3, "
            "Uncontained: FBHUB. RST: Yes, D-RST: No\n"
        )

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "health"
    assert "Xid 95 at 0000:00:06: uncontained ECC error" in report["floors"][4]["detail"]


@pytest.mark.parametrize("code", [43, 92])
def test_an_xid_whose_catalogue_bucket_is_ignore_is_reported_but_does_not_break_the_node(
    tmp_path: Path, code: int
) -> None:
    root = copy(tmp_path)
    with (root / "dmesg.txt").open("a") as log:
        log.write(f"[ 9000.000000] NVRM: Xid (PCI:0000:00:06): {code}, pid=4242, name=python3, event\n")

    exit_code, report, _ = check(root)

    assert exit_code == 0 and f"Xid {code} at 0000:00:06" in report["floors"][4]["detail"]


@pytest.mark.parametrize(
    ("named", "power_cycle", "said"),
    [
        ("GPU Reset Required", True, "power cycle the VM from Proxmox"),
        ("Node Reboot Required", False, "reset it on the Proxmox host (PCI remove/rescan, or reboot the host"),
    ],
)
def test_xid_154_asks_for_the_action_its_line_names_and_a_reboot_is_the_hosts(
    tmp_path: Path, named: str, power_cycle: bool, said: str
) -> None:
    root = copy(tmp_path)
    with (root / "dmesg.txt").open("a") as log:
        log.write(
            "[ 9000.000000] NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x0 (None) to "
            f"0x2 ({named})\n"
        )

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "health"
    assert f"Xid 154 at 0000:00:06: GPU recovery action changed to '{named}'" in report["floors"][4]["detail"]
    assert said in report["fix"]["command"]
    assert report["fix"]["powerCycle"] is power_cycle


def test_pending_row_remapping_in_the_nvml_reading_breaks_the_health_floor(tmp_path: Path) -> None:
    root = copy(tmp_path)
    reading = json.loads((root / "nvml.json").read_text())
    reading["gpus"][0]["remappedRows"] = [0, 1, 1, 0]
    (root / "nvml.json").write_text(json.dumps(reading))

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "health" and "row remapping pending" in report["floors"][4]["detail"]


def test_nvml_reporting_another_driver_than_the_module_is_the_articles_trap_7(tmp_path: Path) -> None:
    root = copy(tmp_path)
    reading = json.loads((root / "nvml.json").read_text())
    reading["driver"] = "580.95.05"
    (root / "nvml.json").write_text(json.dumps(reading))

    code, report, _ = check(root)

    assert code == 1 and report["firstBroken"] == "nvml"
    assert report["fix"]["traps"] == ["trap 7: Failed to initialize NVML: Driver/library version mismatch"]


def test_without_an_nvml_reading_the_nvml_floor_is_skipped_not_failed() -> None:
    out = io.StringIO()
    argv = ["--sysfs-root", str(H200 / "sys"), "--proc-root", str(H200 / "proc"), "--kernel-log",
            str(H200 / "dmesg.txt"), "--node", "n", "-o", "json", *EXPECT]  # fmt: skip
    code = main(argv, out=out, err=io.StringIO())
    report = json.loads(out.getvalue())

    assert code == 0 and states(report)["nvml"] is None
    assert report["floors"][3]["detail"].startswith("skipped: ")


def test_without_a_kernel_log_or_an_nvml_reading_the_health_floor_is_skipped_not_passed() -> None:
    out = io.StringIO()
    argv = ["--sysfs-root", str(H200 / "sys"), "--proc-root", str(H200 / "proc"), "--node", "n", "-o", "json"]
    code = main(argv, out=out, err=io.StringIO())
    report = json.loads(out.getvalue())

    assert code == 0 and states(report)["health"] is None
    assert report["floors"][4]["detail"].startswith("skipped: no kernel log")


@pytest.mark.parametrize(
    ("gpus", "words"),
    [
        (["x"], "gpus[0] is not an object"),
        ([{"pci": {"busId": "garbage"}}], "gpus[0] has no pci.busId like 00000000:00:06.0"),
        ([{"pci": {"busId": "00000000:00:06.0"}, "virtualizationMode": [1]}], "virtualizationMode is [1]"),
        ([{"pci": {"busId": "00000000:00:06.0"}, "remappedRows": 5}], "remappedRows is 5"),
    ],
)
def test_a_saved_nvml_reading_that_is_not_node_checks_shape_is_a_usage_error_in_one_line(
    tmp_path: Path, gpus: list[Any], words: str
) -> None:
    root = copy(tmp_path)
    (root / "nvml.json").write_text(json.dumps({"driver": "580.159.04", "gpus": gpus}))

    code, _, err = check(root)

    assert code == 2 and words in err and err.count("\n") == 1


def test_save_nvml_where_nothing_is_read_live_is_a_usage_error() -> None:
    code, _, err = check(H200, "--save-nvml", "/nonexistent/nvml.json")

    assert code == 2 and "--save-nvml writes the live NVML reading" in err


def test_a_sysfs_root_without_the_kernels_layout_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    code, _, err = check(tmp_path)

    assert code == 2
    assert err.startswith("gpu-pool node-check: ") and "--sysfs-root must be /sys or a copy" in err
    assert err.count("\n") == 1


def test_a_malformed_expected_id_is_a_usage_error() -> None:
    code, _, err = check(H200, "--expect-id", "2335")

    assert code == 2 and "--expect-id 2335: expected vvvv:dddd" in err


def on_a_gpu_worker(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """What a node has: python3, no venv, the files the docs say to copy; -S -E -s hide every site package."""
    from day2.bundle import NODE_CHECK_FILES  # what `gpu-pool repair` sends over SSH: the same files

    for name in NODE_CHECK_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    command = [sys.executable, "-S", "-E", "-s", "-m", "day2.node_check", *argv]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)


def test_node_check_runs_with_the_standard_library_alone_as_on_a_gpu_worker(tmp_path: Path) -> None:
    done = on_a_gpu_worker(
        tmp_path, "--sysfs-root", str(H200 / "sys"), "--proc-root", str(H200 / "proc"), "--kernel-log",
        str(H200 / "dmesg.txt"), "--nvml-json", str(H200 / "nvml.json"), "--node", "h200-vm", *EXPECT,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("h200-vm: healthy\n")


def test_stack_on_a_node_without_the_projects_environment_says_to_use_print_flags(tmp_path: Path) -> None:
    done = on_a_gpu_worker(tmp_path, "--sysfs-root", str(H200 / "sys"), "--stack", "prod", "--node", "n")

    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--stack prod: reading the stack file needs the project's environment" in done.stderr
    assert "--print-flags" in done.stderr and done.stderr.count("\n") == 1
