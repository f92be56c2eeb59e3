"""`proxmox.ssh.agent: false` with no other SSH credential: the Proxmox provider could not upload the cloud-init
snippets at `up`, so preview refuses it, naming the key and the three ways to give one."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from components.stack_check import validate_stack
from config.run_environment import ssh_credential_problems
from config.stack import StackConfig
from offline.runner import read_stack_file
from tests.config.refusal import Run


def _stack(**proxmox: Any) -> StackConfig:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    raw["proxmox"]["ssh"]["agent"] = False
    raw["proxmox"].update(proxmox)
    return validate_stack(raw)


def test_without_the_agent_and_with_an_api_token_the_snippet_upload_has_no_credential() -> None:
    [problem] = ssh_credential_problems(_stack(), {})

    assert problem.startswith("gpu-pool:proxmox.ssh.agent: false leaves the Proxmox provider no SSH credential")
    assert "PROXMOX_VE_SSH_PASSWORD or PROXMOX_VE_SSH_PRIVATE_KEY" in problem
    assert "proxmox.auth: rootPassword" in problem


@pytest.mark.parametrize(
    ("proxmox", "environ"),
    [
        ({"auth": "rootPassword"}, {}),
        ({}, {"PROXMOX_VE_SSH_PRIVATE_KEY": "-----BEGIN OPENSSH PRIVATE KEY-----"}),
        ({}, {"PROXMOX_VE_SSH_PASSWORD": "root password"}),
    ],
    ids=["the root password logs in", "a private key for the provider", "a password for the provider"],
)
def test_another_credential_for_the_provider_is_enough(proxmox: dict[str, Any], environ: dict[str, str]) -> None:
    assert ssh_credential_problems(_stack(**proxmox), environ) == []


def test_pulumi_preview_refuses_it_before_registering_anything(
    run_stack_program: Run, prod_config: dict[str, Any], monitor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    prod_config["gpu-pool:proxmox"]["ssh"]["agent"] = False
    for name in ("PROXMOX_VE_SSH_PASSWORD", "PROXMOX_VE_SSH_PRIVATE_KEY"):
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(pulumi.RunError, match=r"gpu-pool:proxmox\.ssh\.agent: false leaves the Proxmox provider"):
        run_stack_program(prod_config)
    assert monitor.recording.registrations == []
