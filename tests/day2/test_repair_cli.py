"""`gpu-pool repair` as a user runs it on saved inputs: the plan it prints (table and `-o json`, step names as
`make diff` uses them), its exit codes, and its refusals, each one line."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.gpu_failure_domain.observed import REPAIRS_ANNOTATION
from day2.bundle import MAX_COMMAND_BYTES, NODE_CHECK_FILES, node_check_command, node_check_zip
from tests.day2.cli_helpers import ROOT, run
from tests.day2.k8s_objects import NOW_TEXT

EXAMPLES = ROOT / "examples" / "day2"
# The H200 lab: prod with dc2 on the lent H200, whose node-check reports are dc2's.
HEALTHY = EXAMPLES / "h200-lab.json"
BROKEN_DRIVER = EXAMPLES / "broken-driver.json"
XID = EXAMPLES / "node-check-dc2-xid79.json"
HEALTHY_REPORT = EXAMPLES / "node-check-dc2.json"
LAB = ("--stack", "h200-lab", "--stack-dir", str(EXAMPLES))
NODE = "rke2-worker-dc2-gpu-a"
REASON = "node:health: Xid 79 at 0000:00:06: GPU has fallen off the bus"


def repair(*argv: str, dump: Path = HEALTHY, report: Path | None = XID, stack: tuple[str, ...] = LAB) -> Any:
    checks = ("--node-check", str(report)) if report else ()
    return run("repair", NODE, *stack, "--from", str(dump), *checks, "--now", NOW_TEXT, *argv)


def edited(tmp_path: Path, change: Callable[[dict[str, Any]], None], source: Path = HEALTHY) -> Path:
    document = json.loads(source.read_text())
    change(document)
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(document))
    return path


def node_of(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in document["items"] if i["kind"] == "Node" and i["metadata"]["name"] == name)


def test_the_json_plan_is_the_issues_shape_with_the_step_names_make_diff_uses() -> None:
    result = repair("-o", "json")

    assert (result.code, result.err) == (0, "")
    document = result.json()
    assert list(document) == ["node", "domain", "repair", "reason", "steps"]
    assert (document["node"], document["domain"], document["repair"], document["reason"]) == (NODE, "dc2", True, REASON)
    assert [step["name"] for step in document["steps"]] == [
        "wave-drain", "power-cycle", "node-ready", "gpu-ready", "cuda-smoke-test", "wave-gate", "rollout",
    ]  # fmt: skip
    assert all(list(step) == ["name", "description"] and step["description"] for step in document["steps"])


def test_the_table_says_why_what_runs_how_it_ends_what_the_guard_rails_found_and_how_to_run_it() -> None:
    result = repair()

    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[:2] == [f"{NODE} (domain dc2): repair", f"  why: {REASON}"]
    assert "  ends: uncordoned and serving once every check passed; its rollout record is left as it is" in lines
    assert "    one domain at a time: no other domain is out (gpu-pool:rollout.maxUnavailable 1)" in lines
    assert "    daily budget: 0 of 2 power cycles in the last 24 hours (gpu-pool:repair.maxPerDay)" in lines
    assert lines[-1] == f"  run it: gpu-pool repair {NODE} --stack h200-lab --stack-dir {EXAMPLES} --yes"


def test_a_healthy_node_needs_no_repair_exit_1() -> None:
    result = repair("-o", "json", report=HEALTHY_REPORT)

    assert result.code == 1
    assert result.json() == {
        "node": NODE,
        "domain": "dc2",
        "repair": False,
        "reason": f"no repair needed: every floor of {NODE} is ok, node-check's included",
        "steps": [],
    }


def test_an_oom_killed_driver_build_gets_exit_1_and_its_own_fix() -> None:
    result = repair(dump=BROKEN_DRIVER, report=None, stack=("--stack", "prod"))

    assert result.code == 1 and result.err == ""
    assert result.out.startswith(f"{NODE} (domain dc2): no repair\n  reason: driver is broken (")
    assert "trap 1: The driver gets OOM-killed, exit 137; next: kubectl -n gpu-operator logs" in result.out


def test_a_card_of_another_model_at_the_address_is_no_repair_exit_1_with_its_reason_and_the_ids_seen(
    tmp_path: Path,
) -> None:
    """A real H100 (10de:2330) in the VM where the stack says H200 (10de:2335) read as a card that fell off the bus,
    and `repair` planned a power cycle that cannot fix it."""
    from dataclasses import replace

    from day2.node_check.floors import report_json, walk
    from tests.day2.test_repair_decision import EXPECTED, h200

    h100 = replace(h200(), devices=tuple(replace(d, device=0x2330) for d in h200().devices))
    report = tmp_path / "node-check-h100.json"
    report.write_text(json.dumps(report_json(walk(h100, EXPECTED, NODE))))

    result = repair("-o", "json", report=report)

    assert result.code == 1, result.err
    document = result.json()
    assert document["repair"] is False and document["steps"] == []
    assert "a device of another model" in document["reason"] and "10de:2330" in document["reason"]
    assert "power cycle" in document["reason"]


def test_a_dump_without_a_node_check_report_cannot_see_a_card_fault() -> None:
    result = repair(report=None)

    assert result.code == 1
    assert "node-check did not run (--from reads files only: give the node's report with --node-check FILE)" in (
        result.out
    )


def test_another_domain_cordoned_is_a_refusal_in_one_line_exit_2(tmp_path: Path) -> None:
    dump = edited(tmp_path, lambda d: node_of(d, "rke2-worker-dc1-gpu-a")["spec"].update(unschedulable=True))

    result = repair(dump=dump)

    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"gpu-pool: repair {NODE} refused: dc1 is out (cordoned): repairing dc2 too ")
    assert result.err.count("\n") == 1


def test_a_spent_budget_is_a_refusal_exit_2(tmp_path: Path) -> None:
    records = [
        {"at": at, "event": "power-cycle", "reason": REASON, "vm": "VM 4201 on pve-dc2"}
        for at in ("2026-05-03T12:00:00Z", "2026-05-04T08:00:00Z")
    ]

    def spend(document: dict[str, Any]) -> None:
        node_of(document, NODE)["metadata"]["annotations"][REPAIRS_ANNOTATION] = json.dumps(records)

    result = repair(dump=edited(tmp_path, spend))

    assert (result.code, result.out) == (2, "")
    assert "dc2's VM was power-cycled by gpu-pool repair 2 times in the last 24 hours" in result.err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ("repair", "rke2-server-1", "--stack", "prod", "--from", str(HEALTHY)),
            "repair rke2-server-1: not a GPU "
            "node of stack prod; its GPU nodes: rke2-worker-dc1-gpu-a, rke2-worker-dc2-gpu-a, rke2-worker-dc3-gpu-a",
        ),
        (("repair", NODE, "--from", str(HEALTHY)), "the following arguments are required: --stack"),
        (
            ("repair", NODE, "--stack", "prod", "--from", str(HEALTHY), "--yes"),
            "--yes repairs the live cluster: drop --from",
        ),
        (
            ("repair", NODE, "--stack", "prod", "--from", str(HEALTHY), "--node-check", str(ROOT / "README.md")),
            "--node-check",
        ),
        (("repair", NODE, "--stack", "nosuch", "--from", str(HEALTHY)), "--stack nosuch"),
    ],
    ids=["not a GPU node", "no stack", "yes on a dump", "not a report", "no such stack"],
)
def test_an_input_error_is_one_line_exit_2(argv: tuple[str, ...], said: str) -> None:
    result = run(*argv)

    assert result.code == 2 and result.out == ""
    assert said in result.err and result.err.count("\n") == 1 and "Traceback" not in result.err


def test_a_report_of_another_node_is_an_input_error(tmp_path: Path) -> None:
    report = json.loads(XID.read_text()) | {"node": "rke2-worker-dc1-gpu-a"}
    path = tmp_path / "nc.json"
    path.write_text(json.dumps(report))

    result = repair(report=path)

    assert result.code == 2 and f"no report of {NODE} in it" in result.err


def test_a_dry_run_from_files_runs_no_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry run from files touches nothing: kubectl and ssh are not even on PATH."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert repair().code == 0


# ---------------------------------------------------------------------------------------------------- node-check


def test_node_check_over_ssh_is_the_zip_of_exactly_its_standard_library_files(tmp_path: Path) -> None:
    import subprocess
    import sys
    import zipfile

    path = tmp_path / "nc.pyz"
    path.write_bytes(node_check_zip())
    assert sorted(zipfile.ZipFile(path).namelist()) == sorted([*NODE_CHECK_FILES, "__main__.py"])
    assert node_check_zip() == node_check_zip()  # the same bytes for the same sources
    h200 = ROOT / "tests" / "fixtures" / "node_check" / "h200"
    flags = [
        "--sysfs-root", str(h200 / "sys"), "--proc-root", str(h200 / "proc"), "--run-root", str(h200),
        "--nvml-json", str(h200 / "nvml.json"), "--kernel-log", str(h200 / "dmesg.txt"), "--node", NODE,
    ]  # fmt: skip
    command = [sys.executable, "-S", "-E", "-s", str(path), *flags, "-o", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["firstBroken"] is None


@pytest.mark.parametrize(("strict", "exit_code"), [(False, 0), (True, 1)])
def test_the_ssh_command_runs_node_check_from_the_zip_and_leaves_nothing_behind(
    tmp_path: Path, strict: bool, exit_code: int
) -> None:
    """The command the node's shell runs: the report for the decision (a broken floor is an answer, exit 0), the
    check after the power cycle fails on it (exit 1)."""
    import subprocess

    h200 = ROOT / "tests" / "fixtures" / "node_check" / "h200"
    flags = [
        "--sysfs-root", str(h200 / "sys"), "--proc-root", str(h200 / "proc"), "--run-root", str(h200),
        "--nvml-json", str(h200 / "nvml.json"), "--kernel-log", str(h200 / "dmesg.txt"), "--node", NODE,
        "--expect-id", "10de:25b0",
    ]  # fmt: skip
    command = node_check_command(flags, strict=strict)
    # Its own temporary folder: /tmp is shared with every other test worker running this command at the same time.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}

    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False, env=env)

    assert done.returncode == exit_code, done.stderr
    assert len(command) < MAX_COMMAND_BYTES
    assert list(temporary.iterdir()) == []
    if strict:
        assert done.stdout.startswith(f"{NODE}: broken at pci\n")
    else:
        # An H200 where the flags expect an A1000: another model at the card's place, which no power cycle fixes.
        report = json.loads(done.stdout)
        assert report["fix"]["powerCycle"] is False
        assert "a device of another model" in report["floors"][0]["detail"]


def test_the_example_xid_report_is_node_check_on_the_h200_capture_with_an_xid_79_in_its_kernel_log(
    tmp_path: Path,
) -> None:
    h200 = ROOT / "tests" / "fixtures" / "node_check" / "h200"
    log = tmp_path / "dmesg.txt"
    xid = "[ 9000.000000] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    log.write_text((h200 / "dmesg.txt").read_text() + xid + "\n")

    result = run(
        "node-check", "--sysfs-root", str(h200 / "sys"), "--proc-root", str(h200 / "proc"), "--run-root", str(h200),
        "--kernel-log", str(log), "--nvml-json", str(h200 / "nvml.json"), "--expect-id", "10de:2335",
        "--expect-subsystem", "10de:18bf", "--expect-driver", "580.159.04", "--node", NODE, "-o", "json",
    )  # fmt: skip

    assert result.code == 1 and result.err == ""
    assert result.json() == json.loads(XID.read_text())


def test_the_h200_lab_is_prod_with_dc2_on_the_lent_h200_and_nothing_else() -> None:
    from offline.runner import read_stack_file

    lab = read_stack_file("h200-lab", EXAMPLES)
    prod = read_stack_file("prod")
    dc2 = lab["gpu-pool:failureDomains"][1]

    assert dc2["gpu"] | {"pciAddress": "0000:41:00", "iommuGroup": 40} == dc2["gpu"]
    assert (dc2["gpu"]["vendorDeviceId"], dc2["gpu"]["subsystemId"]) == ("10de:2335", "10de:18bf")
    assert lab["gpu-pool:gpuOperator"]["driverVersion"] == json.loads(XID.read_text())["facts"]["driver"]
    prod["gpu-pool:failureDomains"][1] = dc2
    prod["gpu-pool:gpuOperator"] = lab["gpu-pool:gpuOperator"]
    assert lab == prod


def lab_with_proxmox_at(tmp_path: Path, endpoint: str) -> tuple[str, ...]:
    """The H200 lab's stack file in a folder of its own, its Proxmox API at `endpoint`."""
    import yaml

    document = yaml.safe_load((EXAMPLES / "Pulumi.h200-lab.yaml").read_text())
    document["config"]["gpu-pool:proxmox"]["endpoint"] = endpoint
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / "Pulumi.h200-lab.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return ("--stack", "h200-lab", "--stack-dir", str(folder))


def closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_the_proxmox_token_comes_from_the_secrets_file_the_preview_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the token in GPU_POOL_SECRETS_FILE the dry run checks the VM against Proxmox (here: nothing listens),
    and never prints the token."""
    secrets = tmp_path / "lab.env"
    secrets.write_text("proxmoxApiToken=root@pam!gpu-pool=0b7c4c1e-not-a-real-token\n")
    monkeypatch.delenv("GPU_POOL_SECRET_PROXMOXAPITOKEN", raising=False)
    monkeypatch.setenv("GPU_POOL_SECRETS_FILE", str(secrets))
    endpoint = f"https://127.0.0.1:{closed_port()}/"

    result = repair(stack=lab_with_proxmox_at(tmp_path, endpoint))

    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"gpu-pool: cannot reach the Proxmox API at {endpoint}: ")
    assert result.err.count("\n") == 1 and "not-a-real-token" not in result.err


def test_a_secrets_file_inside_the_stacks_folder_is_refused_as_the_preview_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = lab_with_proxmox_at(tmp_path, "https://pve-dc1.lab.internal:8006/")
    inside = tmp_path / "stack" / "lab.env"
    inside.write_text("proxmoxApiToken=root@pam!gpu-pool=0b7c4c1e-not-a-real-token\n")
    monkeypatch.setenv("GPU_POOL_SECRETS_FILE", str(inside))

    result = repair(stack=stack)

    assert (result.code, result.out) == (2, "")
    assert "is inside the repository, where a commit can take it" in result.err
    assert result.err.count("\n") == 1 and "not-a-real-token" not in result.err
