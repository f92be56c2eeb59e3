"""The mistakes a new user made writing a stack for their own lab: each refused (or normalised) at preview,
with a message naming the key and the fix, never a secret's value, and nothing registered."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from offline.runner import ROOT_DIR, StackFileError, read_stack_file, run_stack
from tests.config.refusal import FD, Run, refused

# --- paths and URLs that fail only during `up` ---------------------------------------------------------------


def test_a_kubeconfig_under_home_is_expanded_before_any_kubectl_step_quotes_it(
    run_stack_program: Run, prod_config, monkeypatch
):
    monkeypatch.setenv("HOME", "/home/ops")
    prod_config["gpu-pool:kubernetes"] = {"kubeconfig": "~/.kube/lab.yaml", "context": "lab"}
    recording = run_stack_program(prod_config)
    assert (
        recording.named("dc1-node-taint").inputs["create"].startswith("kubectl --kubeconfig /home/ops/.kube/lab.yaml")
    )
    assert "/home/ops/.kube/lab.yaml" in recording.named("dc1-node-ready").inputs["environment"]["KUBECTL"]
    assert recording.named("kubernetes").inputs["kubeconfig"] == "/home/ops/.kube/lab.yaml"


def test_a_relative_kubeconfig_becomes_absolute_so_every_step_reads_the_same_file(run_stack_program: Run, prod_config):
    prod_config["gpu-pool:kubernetes"] = {"kubeconfig": "secrets/lab.kubeconfig"}
    recording = run_stack_program(prod_config)
    assert recording.named("kubernetes").inputs["kubeconfig"] == os.path.abspath("secrets/lab.kubeconfig")


def test_a_proxmox_endpoint_with_the_api_path_is_refused_saying_which_part_to_drop(
    run_stack_program: Run, prod_config, monitor
):
    prod_config["gpu-pool:proxmox"]["endpoint"] = "https://pve-dc1.lab.internal:8006/api2/json"
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:proxmox.endpoint: drop '/api2/json'" in message
    assert "https://pve-dc1.lab.internal:8006/" in message


# --- secrets: their shape, never their value ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("rke2Token", "", "gpu-pool:rke2Token: the RKE2 join token is empty"),
        ("rke2Token", "K10deadbeef::server:abc", "has a CA hash of 8 characters after K10, where RKE2 takes 64"),
        ("rke2Token", "my-token\n", "starts or ends with whitespace"),
        ("proxmoxApiToken", "pulumi@pve!gpu-pool", "has no '=<secret>' part"),
        ("proxmoxApiToken", "root@pam=hunter2", "expected user@realm!tokenid=<uuid>"),
    ],
    ids=[
        "an empty join token",
        "a mangled full join token",
        "a join token with its newline",
        "an API token without its secret",
        "a password where the API token goes",
    ],
)
def test_a_malformed_secret_is_refused_showing_the_expected_shape_but_never_the_value(
    run_stack_program: Run, prod_config, monitor, key: str, value: str, expected: str
):
    message = refused(run_stack_program, prod_config, monitor, {key: value})
    assert expected in message and "(value not shown)" in message
    if value.strip():
        assert value.strip() not in message


def test_a_secret_written_in_plain_text_in_the_stack_file_is_refused_with_the_command_that_encrypts_it(
    run_stack_program: Run, prod_config, monitor
):
    prod_config["gpu-pool:rke2Token"] = "K10" + "ab" * 32 + "::server:in-the-clear"
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:rke2Token: the RKE2 join token is in the stack file in plain text" in message
    assert "pulumi config set --secret gpu-pool:rke2Token <value>" in message
    assert "in-the-clear" not in message


def test_the_offline_preview_refuses_a_plain_text_secret_too(tmp_path):
    import yaml

    from offline.runner import read_stack_file

    config = read_stack_file("prod")
    config["gpu-pool:proxmoxApiToken"] = "pulumi@pve!gpu-pool=12345678-1234-1234-1234-123456789abc"
    with pytest.raises(pulumi.RunError, match="in plain text"):
        run_stack("prod", config=config)
    assert yaml.safe_dump(config)


def test_a_domain_without_any_login_is_a_warning_not_an_error(run_stack_program: Run, prod_config, monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    run_stack_program(prod_config)
    assert any(w.startswith("gpu-pool:failureDomains[dc1].sshAuthorizedKeys: none given") for w in warnings)
    assert any("the VM will have no login" in w for w in warnings)


# --- type mix-ups get the fix, in YAML ---------------------------------------------------------------------


TYPE_MIXUPS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "a driver version YAML read as a number",
        lambda c: c["gpu-pool:gpuOperator"].update({"driverVersion": 570.211}),
        "gpu-pool:gpuOperator.driverVersion: expects text (got 570.211); "
        'YAML read a float: quote it, driverVersion: "570.211"',
    ),
    (
        "a sharing profile given as a bare number",
        lambda c: c["gpu-pool:sharingProfiles"].update({"a1000-x4": 4}),
        "gpu-pool:sharingProfiles.a1000-x4: expects a map of keys (got 4); "
        "write a map of keys under it, e.g. a1000-x4: {replicas: 4}",
    ),
    (
        "failure domains given as a map instead of a list",
        lambda c: c.update({FD: {"dc1": c[FD][0]}}),
        "gpu-pool:failureDomains: expects a list; write a list of `- name: ...` entries under failureDomains",
    ),
    (
        "replicas in quotes",
        lambda c: c["gpu-pool:sharingProfiles"]["whole"].update({"replicas": "1"}),
        "gpu-pool:sharingProfiles.whole.replicas: expects a whole number (got '1'); "
        "write a whole number without quotes, e.g. replicas: 1",
    ),
    (
        "a yes/no where a boolean goes",
        lambda c: c.update({"gpu-pool:monitoring": {"serviceMonitor": "maybe"}}),
        "gpu-pool:monitoring.serviceMonitor: expects true or false (got 'maybe'); write true or false without quotes",
    ),
    (
        "a VM id in words gets an example the VM id itself accepts",
        lambda c: c[FD][0].update({"vmId": "four-two"}),
        "gpu-pool:failureDomains[dc1].vmId: expects a whole number (got 'four-two'); "
        "write a whole number without quotes, e.g. vmId: 100",
    ),
    (
        "memory with a unit gets the default as its example",
        lambda c: c[FD][0].update({"memoryMiB": "32G"}),
        "gpu-pool:failureDomains[dc1].memoryMiB: expects a whole number (got '32G'); "
        "write a whole number without quotes, e.g. memoryMiB: 16384",
    ),
    (
        "network: dhcp is shown under the key that takes dhcp",
        lambda c: c[FD][0].update({"network": "dhcp"}),
        "gpu-pool:failureDomains[dc1].network: expects a map of keys (got 'dhcp'); "
        "write a map of keys under it, e.g. network: {ipv4: dhcp}",
    ),
    (
        "a section given as a plain value instead of a map",
        lambda c: c.update({"gpu-pool:proxmox": "https://pve:8006"}),
        "gpu-pool:proxmox: expects a map of keys (got 'https://pve:8006'); "
        "write a map of keys under it, e.g. proxmox: {endpoint: ..., cloudImage: ...}",
    ),
]


@pytest.mark.parametrize(("mistake", "break_config", "expected"), TYPE_MIXUPS, ids=[m[0] for m in TYPE_MIXUPS])
def test_a_type_mix_up_gets_the_shape_to_write_instead(
    run_stack_program: Run, prod_config, monitor, mistake, break_config, expected
):
    break_config(prod_config)
    assert expected in refused(run_stack_program, prod_config, monitor), mistake


def test_a_key_written_without_the_project_prefix_is_this_projects_as_the_cli_reads_it(tmp_path):
    text = (ROOT_DIR / "Pulumi.prod.yaml").read_text().replace("  gpu-pool:rke2:", "  rke2:", 1)
    (tmp_path / "Pulumi.prod.yaml").write_text(text)
    assert read_stack_file("prod", tmp_path) == read_stack_file("prod")


def test_a_key_given_with_and_without_its_prefix_is_refused_since_the_cli_would_keep_either(tmp_path):
    text = (ROOT_DIR / "Pulumi.prod.yaml").read_text().replace("config:\n", "config:\n  rke2: {}\n", 1)
    (tmp_path / "Pulumi.prod.yaml").write_text(text)
    with pytest.raises(StackFileError, match="gpu-pool:rke2 is given twice, once without its `gpu-pool:` prefix"):
        read_stack_file("prod", tmp_path)


def test_a_misspelt_project_prefix_is_recognised_as_such(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu_pool:smokeTest"] = {"enabled": False}
    assert "gpu_pool:smokeTest: 'gpu_pool' is not this project's prefix; write it as gpu-pool:smokeTest" in refused(
        run_stack_program, prod_config, monitor
    )


def test_single_key_and_cross_key_mistakes_come_back_in_one_run(run_stack_program: Run, prod_config, monitor):
    prod_config[FD][0]["gpu"]["pciAddress"] = "01:00.0"  # single key, dc1
    prod_config[FD][2]["vmId"] = 4201  # cross key: dc2's VM id
    prod_config[FD][1]["sharing"] = "a1000-x8"  # cross key: no such profile
    prod_config["gpu-pool:rke2"]["version"] = "latest"  # single key
    message = refused(run_stack_program, prod_config, monitor, {"rke2Token": ""})
    assert "gpu-pool:failureDomains[dc1].gpu.pciAddress: is lspci's short form" in message
    assert "gpu-pool:failureDomains[dc3].vmId: 4201 is already used by failureDomains[dc2]" in message
    assert "gpu-pool:failureDomains[dc2].sharing: 'a1000-x8' is not a defined sharing profile" in message
    assert "gpu-pool:rke2.version: 'latest' is a channel" in message
    assert "gpu-pool:rke2Token: the RKE2 join token is empty" in message


def test_a_gateway_outside_the_vms_subnet_is_refused_before_the_node_waits_for_a_route(
    run_stack_program, prod_config, monitor
):
    from tests.config.refusal import refused

    prod_config["gpu-pool:failureDomains"][0]["network"]["gateway"] = "10.10.22.1"
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc1].network" in message
    assert "gateway 10.10.22.1 is outside the VM's subnet 10.10.21.0/24" in message


def test_a_private_key_pasted_as_a_public_key_is_refused_without_printing_it(run_stack_program, prod_config, monitor):
    from tests.config.refusal import refused

    private = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAsentinelprivatebody\n"
    private += "-----END OPENSSH PRIVATE KEY-----"
    prod_config["gpu-pool:failureDomains"][0]["sshAuthorizedKeys"] = [private]
    message = refused(run_stack_program, prod_config, monitor)
    assert "gpu-pool:failureDomains[dc1].sshAuthorizedKeys: entry 0 is a private key (value not shown)" in message
    assert "sentinelprivatebody" not in message and "BEGIN" not in message
