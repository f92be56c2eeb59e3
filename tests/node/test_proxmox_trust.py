"""The lab CA (`gpu-pool:trustedCa`) reaches the program's own Proxmox client where it calls out: the watcher runs
in an image whose store has no lab CA, so a Proxmox API whose certificate the lab CA signed was unreachable to it
(issue 49, item 1: "the program's own in-cluster payloads where they call out"). Real TLS: a loopback https server
with a certificate of a CA made in the test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.gpu_platform.health_check import pool_facts_document
from components.stack_check import validate_stack
from components.unattended.watcher_facts import watcher_facts_document
from day2.repair.watcher_core import WatcherFacts
from node.proxmox import Proxmox, ProxmoxFailed
from offline.runner import read_stack_file
from tests.lab_ca import LabCa, make_lab_ca
from tests.lab_https import serving


@pytest.fixture
def lab(tmp_path: Path) -> LabCa:
    return make_lab_ca(tmp_path / "ca")


@pytest.fixture
def pve(lab: LabCa, tmp_path: Path) -> Iterator[str]:
    """A Proxmox API stand-in (one GET answer) behind a certificate of the lab CA; yields its endpoint."""
    root = tmp_path / "root"
    (root / "api2" / "json").mkdir(parents=True)
    (root / "api2" / "json" / "version").write_text(json.dumps({"data": {"version": "8.3.0"}}))
    certificate, key = lab.issue("pve", ("localhost",))
    with serving(root, certificate, key, tmp_path / "requests.log") as port:
        yield f"https://localhost:{port}"


def test_the_proxmox_client_trusts_a_certificate_of_the_stacks_lab_ca(pve: str, lab: LabCa) -> None:
    assert Proxmox(pve, trusted_ca=lab.pem).call("GET", "/version") == {"version": "8.3.0"}


def test_without_the_lab_ca_the_refusal_names_trusted_ca_as_the_fix(pve: str) -> None:
    with pytest.raises(ProxmoxFailed) as refused:
        Proxmox(pve).call("GET", "/version")
    assert "certificate verify failed" in str(refused.value) and "gpu-pool:trustedCa" in str(refused.value)


def test_another_ca_is_not_trusted_in_its_place(pve: str, tmp_path: Path) -> None:
    stranger = make_lab_ca(tmp_path / "stranger", "stranger-ca")
    with pytest.raises(ProxmoxFailed, match="certificate verify failed"):
        Proxmox(pve, trusted_ca=stranger.pem).call("GET", "/version")


def _watcher_facts(extra: dict[str, object]) -> WatcherFacts:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_file("prod").items()}
    cfg = validate_stack(raw | {"repair": {"healthCheck": {"enabled": True}, "unattended": {"enabled": True}}} | extra)
    document = watcher_facts_document(cfg, "h200-lab", pool_facts_document(cfg, "h200-lab"))
    # As the watcher reads it: the facts ConfigMap's JSON.
    return WatcherFacts.from_json(json.loads(json.dumps(document)))


def test_the_watcher_reaches_a_proxmox_signed_by_the_lab_ca_given_as_trusted_ca(
    pve: str, lab: LabCa, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = _watcher_facts({"trustedCa": lab.pem})
    assert facts.proxmox_trusted_ca is not None and facts.as_json()["proxmox"]["trustedCa"] == facts.proxmox_trusted_ca
    client = Proxmox(pve, facts.proxmox_insecure, facts.proxmox_trusted_ca)
    assert client.call("GET", "/version") == {"version": "8.3.0"}


def test_a_stack_without_a_lab_ca_keeps_its_watcher_facts_as_they_were() -> None:
    facts = _watcher_facts({})
    assert facts.proxmox_trusted_ca is None
    assert set(facts.as_json()["proxmox"]) == {"endpoint", "insecure"}
