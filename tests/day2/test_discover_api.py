"""`gpu-pool discover --stack NAME` against the Proxmox API itself (a loopback HTTPS server answering the
documented shapes): the same entries as from a saved answer, cards mapped in Proxmox named as such, and a
refused token or an unverifiable certificate as one line, exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.day2.cli_helpers import run
from tests.day2.proxmox_api_server import ProxmoxApi, proxmox_api

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = ROOT / "examples" / "discover"
TOKEN = "pulumi@pve!gpu-pool=5e471e11-0b1c-4d2e-9f3a-7f3a91c0ffee"
TOKEN_ENV = "GPU_POOL_SECRET_PROXMOXAPITOKEN"
# One mapping as PVE::Mapping::PCI stores it: a whole device (no function) on pve-a.
MAPPINGS = [
    {
        "id": "rtx3090-a1",
        "description": "second 3090",
        "map": ["node=pve-a,path=0000:02:00,id=10de:2204,iommugroup=15,subsystem-id=10de:147d"],
    }
]


def _answer(name: str) -> Any:
    return json.loads((ANSWERS / name).read_text(encoding="utf-8"))


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ProxmoxApi]:
    hardware = {"pve-a": _answer("pve-a-hardware-pci.json"), "pve-b": _answer("pve-dc1-hardware-pci.json")}
    with proxmox_api(tmp_path, TOKEN, hardware, MAPPINGS) as served:
        yield served


def _stack(folder: Path, endpoint: str, insecure: bool) -> Path:
    """Pulumi.minimal.yaml pointed at the loopback API."""
    text = (ROOT / "Pulumi.minimal.yaml").read_text(encoding="utf-8")
    text = text.replace("endpoint: https://pve-a.home.arpa:8006/", f"endpoint: {endpoint}")
    text = text.replace("insecure: true", f"insecure: {'true' if insecure else 'false'}")
    (folder / "Pulumi.lab.yaml").write_text(text, encoding="utf-8")
    return folder


def test_the_api_gives_the_entries_a_saved_answer_gives_and_names_the_card_mapped_in_proxmox(
    api: ProxmoxApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    folder = _stack(tmp_path, api.url, insecure=True)

    live = run("discover", "--stack", "lab", "--stack-dir", str(folder), "--node", "pve-a", "-o", "json")
    saved = run("discover", "--from", str(ANSWERS / "pve-a-hardware-pci.json"), "--node", "pve-a", "-o", "json")

    assert live.code == 0, live.err
    cards = live.json()["nodes"][0]["cards"]
    assert [c["proxmoxMapping"] for c in cards] == [None, "rtx3090-a1"]
    assert [{**c, "proxmoxMapping": None, "inStack": None} for c in cards] == saved.json()["nodes"][0]["cards"]
    assert api.requests == ["/api2/json/cluster/mapping/pci", "/api2/json/nodes/pve-a/hardware/pci"]


def test_every_node_the_stack_names_is_asked_and_the_table_says_mapped_in_proxmox(
    api: ProxmoxApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)

    result = run("discover", "--stack", "lab", "--stack-dir", str(_stack(tmp_path, api.url, insecure=True)))

    assert result.code == 0, result.err
    assert "# pve-a: 2 NVIDIA cards" in result.out and "# pve-b: 1 NVIDIA card" in result.out
    assert "0000:02:00 NVIDIA GeForce RTX 3090" in result.out
    assert "already in the stack as failureDomains[host-a].gpus[1], mapped in Proxmox as rtx3090-a1" in result.out
    assert {"/api2/json/nodes/pve-a/hardware/pci", "/api2/json/nodes/pve-b/hardware/pci"} <= set(api.requests)


def test_a_token_the_api_refuses_is_one_line_with_its_answer(
    api: ProxmoxApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "pulumi@pve!gpu-pool=00000000-0000-0000-0000-000000000000")

    result = run("discover", "--stack", "lab", "--stack-dir", str(_stack(tmp_path, api.url, insecure=True)))

    assert result.code == 2 and result.err.count("\n") == 1
    assert "the Proxmox API answered 401 authentication failure" in result.err
    assert "00000000-0000" not in result.err


def test_a_self_signed_certificate_without_insecure_says_which_key_accepts_it(
    api: ProxmoxApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)

    result = run("discover", "--stack", "lab", "--stack-dir", str(_stack(tmp_path, api.url, insecure=False)))

    assert result.code == 2 and result.err.count("\n") == 1
    assert "CERTIFICATE_VERIFY_FAILED" in result.err and "gpu-pool:proxmox.insecure: true" in result.err


def test_a_saved_mapping_list_names_the_mapped_card_offline_too(tmp_path: Path) -> None:
    mappings = tmp_path / "mappings.json"
    mappings.write_text(json.dumps(MAPPINGS), encoding="utf-8")

    result = run(
        "discover", "--from", str(ANSWERS / "pve-a-hardware-pci.json"), "--node", "pve-a", "--mappings", str(mappings)
    )

    assert (
        "0000:02:00 NVIDIA GeForce RTX 3090: functions 0000:02:00.0, 0000:02:00.1, mapped in Proxmox as rtx3090-a1"
        in result.out
    )
