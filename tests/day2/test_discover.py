"""`gpu-pool discover`: the cards of a Proxmox node, from its saved `hardware/pci` answer, as entries to paste."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config.failure_domain import FailureDomainConfig
from config.stack_yaml import load_stack_yaml
from offline.recording import Recording
from offline.runner import read_stack_file
from tests.day2.cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = ROOT / "examples" / "discover"
TWO_CARDS = ANSWERS / "pve-a-hardware-pci.json"
MS01 = ANSWERS / "pve-dc1-hardware-pci.json"
FD = "gpu-pool:failureDomains"


def pasted(out: str) -> dict[str, Any]:
    """What a user pastes: the lines discover prints that are not comments, read as the Pulumi CLI reads them."""
    entry = load_stack_yaml("".join(line + "\n" for line in out.splitlines() if not line.startswith("#")), "paste")
    assert isinstance(entry, dict)
    return entry


def saved(tmp_path: Path, answer: Any) -> Path:
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer), encoding="utf-8")
    return path


def test_both_cards_of_a_two_card_host_come_out_as_the_entry_the_shipped_stack_uses() -> None:
    result = run("discover", "--from", str(TWO_CARDS), "--node", "pve-a")
    assert result.code == 0, result.err
    domain = copy.deepcopy(read_stack_file("minimal", ROOT)[FD][0])
    assert domain["proxmoxNode"] == "pve-a"
    del domain["gpus"]
    with_discovered = FailureDomainConfig.model_validate({**domain, **pasted(result.out)})
    assert with_discovered == FailureDomainConfig.model_validate(read_stack_file("minimal", ROOT)[FD][0])


def test_the_pasted_entry_previews_exactly_as_the_hand_typed_one(
    run_stack_program: Callable[..., Recording], prod_config: dict[str, Any], monitor: Any
) -> None:
    result = run("discover", "--from", str(MS01), "--node", "pve-dc1")
    assert result.code == 0, result.err
    before = {r.name: (r.type, r.inputs) for r in run_stack_program(copy.deepcopy(prod_config)).registrations}
    monitor.recording.registrations.clear()
    del prod_config[FD][0]["gpu"]
    prod_config[FD][0].update(pasted(result.out))
    after = {r.name: (r.type, r.inputs) for r in run_stack_program(prod_config).registrations}
    assert after == before


def test_a_card_the_stack_already_names_is_said_to_be_there() -> None:
    result = run("discover", "--from", str(MS01), "--node", "pve-dc1", "--stack", "prod", "--stack-dir", str(ROOT))
    assert "already in the stack as failureDomains[dc1].gpu" in result.out


def test_a_card_sharing_its_iommu_group_with_another_endpoint_is_not_offered(tmp_path: Path) -> None:
    answer = json.loads(TWO_CARDS.read_text())
    nic = next(d for d in answer if d["id"] == "0000:04:00.0")
    nic["iommugroup"] = 13
    result = run("discover", "--from", str(saved(tmp_path, answer)), "--node", "pve-a")
    assert result.code == 1
    assert (
        "NOT USABLE: cannot be passed through alone: IOMMU group 13 also holds 0000:04:00.0 "
        "(Ethernet Controller I226-V)" in result.out
    )
    assert pasted(result.out)["gpu"]["pciAddress"] == "0000:01:00", "only the usable card is offered"


def test_a_host_without_iommu_is_told_to_turn_it_on(tmp_path: Path) -> None:
    answer = [{**d, "iommugroup": -1} for d in json.loads(MS01.read_text())]
    result = run("discover", "--from", str(saved(tmp_path, answer)), "--node", "pve-dc1")
    assert result.code == 1
    assert "in no IOMMU group: IOMMU is off on the host" in result.out


def test_json_output_lists_every_card_with_its_functions_and_whether_it_can_be_passed_through() -> None:
    result = run("discover", "--from", str(TWO_CARDS), "--node", "pve-a", "-o", "json")
    assert result.code == 0
    cards = result.json()["nodes"][0]["cards"]
    assert [(c["pciAddress"], c["functions"], c["passable"]) for c in cards] == [
        ("0000:01:00", ["0000:01:00.0", "0000:01:00.1"], True),
        ("0000:02:00", ["0000:02:00.0", "0000:02:00.1"], True),
    ]
    assert cards[0]["iommuGroup"] == 12 and cards[0]["inStack"] is None


def test_a_host_without_an_nvidia_card_exits_1_saying_so(tmp_path: Path) -> None:
    answer = [d for d in json.loads(MS01.read_text()) if d["vendor"] != "0x10de"]
    result = run("discover", "--from", str(saved(tmp_path, answer)), "--node", "pve-dc1")
    assert result.code == 1 and "no NVIDIA display or 3D controller" in result.out


def test_a_saved_answer_needs_the_node_it_came_from() -> None:
    result = run("discover", "--from", str(MS01))
    assert result.code == 2 and "--from needs --node NAME" in result.err


def test_an_empty_answer_says_how_to_save_one(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("\n")
    result = run("discover", "--from", str(path), "--node", "pve-a")
    assert result.code == 2 and "is empty: save the answer with `pvesh get" in result.err


def test_pveshs_table_output_is_refused_asking_for_json(tmp_path: Path) -> None:
    path = tmp_path / "table.txt"
    path.write_text("┌──────────┬────────┐\n│ class    │ device │\n")
    result = run("discover", "--from", str(path), "--node", "pve-a")
    assert result.code == 2 and "is not JSON: use pvesh's `--output-format json`" in result.err


def test_json_of_another_shape_is_refused_naming_the_command_that_makes_the_right_one(tmp_path: Path) -> None:
    result = run("discover", "--from", str(saved(tmp_path, {"devices": []})), "--node", "pve-a")
    assert result.code == 2
    assert "is not the answer of `pvesh get /nodes/<node>/hardware/pci --output-format json`" in result.err


def test_asking_the_api_without_the_token_in_the_environment_is_a_usage_error(monkeypatch: Any) -> None:
    monkeypatch.delenv("GPU_POOL_SECRET_PROXMOXAPITOKEN", raising=False)
    result = run("discover", "--stack", "prod", "--stack-dir", str(ROOT))
    assert result.code == 2 and "GPU_POOL_SECRET_PROXMOXAPITOKEN" in result.err


# --- the card table: what discover says of each card, and the BARs it fills in ---------------------------------

H200_RESOURCE = ROOT / "tests" / "fixtures" / "node_check" / "h200" / "sys" / "devices" / "pci0000:00" / "0000:00:06.0"


def test_each_card_is_described_from_the_card_table() -> None:
    result = run("discover", "--from", str(MS01), "--node", "pve-dc1")

    assert "#     GA107GL, Ampere; open or proprietary kernel modules\n" in result.out


def test_a_saved_sysfs_resource_of_the_host_fills_bar_mib_with_what_the_preview_reads() -> None:
    result = run(
        "discover", "--from", str(MS01), "--node", "pve-dc1", "--resource", f"0000:01:00.0={H200_RESOURCE / 'resource'}"
    )

    assert result.code == 0, result.err
    assert pasted(result.out)["gpu"]["barMiB"] == 16 + 256 * 1024 + 32


def test_a_resource_file_without_a_memory_bar_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "resource"
    empty.write_text("0x0000000000000000 0x0000000000000000 0x0000000000000000\n")

    result = run("discover", "--from", str(MS01), "--node", "pve-dc1", "--resource", f"0000:01:00.0={empty}")

    assert result.code == 2 and "no memory BAR in it" in result.err


def test_an_h200_gets_its_measured_bars_from_the_card_table(tmp_path: Path) -> None:
    answer = json.loads(MS01.read_text())
    for device in answer:
        if device["id"].startswith("0000:01:00.0"):
            device.update(device="0x2335", device_name="GH100 [H200 SXM 141GB]")
    result = run("discover", "--from", str(saved(tmp_path, answer)), "--node", "pve-dc1")

    assert pasted(result.out)["gpu"]["barMiB"] == 16 + 256 * 1024 + 32
    assert "GH100, Hopper; open or proprietary kernel modules; MIG capable" in result.out


def test_with_a_stack_a_card_its_pinned_driver_does_not_list_is_said_at_once(tmp_path: Path) -> None:
    answer = json.loads(MS01.read_text())
    for device in answer:
        if device["id"].startswith("0000:01:00.0"):
            device.update(device="0x2b85", device_name="GB202 [GeForce RTX 5090]")
    stack = tmp_path / "Pulumi.lab.yaml"
    stack.write_text('config:\n  gpu-pool:gpuOperator:\n    driverVersion: "535.309.01"\n', encoding="utf-8")

    result = run(
        "discover", "--from", str(saved(tmp_path, answer)), "--node", "pve-dc1", "--stack", "lab",
        "--stack-dir", str(tmp_path),
    )  # fmt: skip

    assert "GB202, Blackwell; open kernel modules only" in result.out
    assert "the stack's driver 535.309.01 does not list it (first listed in 570.86.16)" in result.out


def test_an_answer_saved_on_another_node_is_refused_naming_the_node_it_is_from() -> None:
    # pve-a's answer (two RTX 3090s at 01:00 and 02:00) given as pve-b's, whose stack card is an RTX 4060 Ti.
    result = run(
        "discover", "--from", "examples/discover/pve-a-hardware-pci.json", "--node", "pve-b", "--stack", "minimal"
    )

    assert result.code == 2
    assert (
        "it holds every card the stack gives node pve-a and none of node pve-b's, so it was saved on pve-a"
        in result.err
    )
    assert result.out == ""


def test_an_answer_of_the_node_it_is_given_for_is_read() -> None:
    result = run(
        "discover", "--from", "examples/discover/pve-a-hardware-pci.json", "--node", "pve-a", "--stack", "minimal"
    )

    assert result.code == 0 and "NVIDIA GeForce RTX 3090" in result.out
