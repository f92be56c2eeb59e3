"""Values that are well-formed and still impossible on a real lab, found by trying the stack as a new user would:
network and identity facts across domains, numbers YAML reads differently from how they look, keys cut short,
secrets with quotes, volumes Proxmox cannot import, cards the pinned driver cannot drive. Each is refused at
preview with one message naming the key (a domain by its name), the reason and the fix; nothing is registered."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from config.secret_sources import SecretSourceError, secrets_from_environment
from offline.preview import main as preview
from tests.config.refusal import FD, Run, refused

RTX_5090 = {"vendorDeviceId": "10de:2b85", "subsystemId": "10de:205e", "model": "NVIDIA GeForce RTX 5090"}


def _net(config: dict[str, Any], index: int, **network: Any) -> None:
    config[FD][index]["network"].update(network)


# --- network and identity ------------------------------------------------------------------------------------


def test_two_domains_with_one_address_are_refused_naming_the_second(run_stack_program: Run, prod_config, monitor):
    _net(prod_config, 2, ipv4="10.10.22.51/24", gateway="10.10.22.1")

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc3].network.ipv4: 10.10.22.51 is already failureDomains[dc2]'s address" in message
    assert message.count("\n") == 1


@pytest.mark.parametrize(
    ("network", "says"),
    [
        ({"ipv4": "10.10.21.1/24"}, "gateway 10.10.21.1 is the VM's own address"),
        ({"ipv4": "10.10.21.0/24"}, "10.10.21.0 is the network address of 10.10.21.0/24, which no host can have"),
        ({"ipv4": "10.10.21.255/24"}, "10.10.21.255 is the broadcast address of 10.10.21.0/24"),
        ({"gateway": None}, "ipv4 10.10.21.51/24 is static but no gateway is given"),
        ({"ipv4": "dhcp"}, "gateway 10.10.21.1 has no effect with ipv4: dhcp"),
        ({"dnsServers": ["dns.lab.internal"]}, "'dns.lab.internal' is not an IP address"),
        ({"bridge": "vmbr 0"}, "is not a Proxmox bridge name"),
    ],
    ids=[
        "its gateway's address",
        "the network address",
        "the broadcast address",
        "no gateway",
        "a gateway with dhcp",
        "a DNS name as nameserver",
        "a bridge with a space",
    ],
)
def test_an_address_no_vm_can_have_is_refused(
    run_stack_program: Run, prod_config, monitor, network: dict[str, Any], says: str
):
    _net(prod_config, 0, **network)

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc1].network" in message and says in message


def test_a_vm_on_a_proxmox_nodes_own_address_is_refused(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu-pool:proxmox"]["ssh"]["nodeAddresses"] = {"pve-dc1": "10.10.21.51"}

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc1].network.ipv4: 10.10.21.51 is the Proxmox node pve-dc1's address" in message


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("ssh-ed25519", "entry 0 is only the key type 'ssh-ed25519', without the key"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdS1wb29s me@laptop", "whose data does not hold a ssh-ed25519 key"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdS1wb29s0 me@laptop", "is not valid base64 (cut short or wrapped?)"),
        ("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIGdwdS1wb29sIHRlc3Qga2V5LCBubyBwcml2YXRlIG9u me", "does not hold a ssh-rsa"),
        ("me@laptop", "is not an SSH public key"),
    ],
    ids=["the type alone", "cut short", "cut mid-character", "another key's type", "a comment alone"],
)
def test_an_authorized_key_that_is_not_a_key_is_refused(
    run_stack_program: Run, prod_config, monitor, key: str, says: str
):
    prod_config[FD][1]["sshAuthorizedKeys"] = [key]

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc2].sshAuthorizedKeys: entry 0 " in message and says in message


def test_a_vm_id_with_a_leading_zero_is_refused_with_the_number_to_write(tmp_path: Path) -> None:
    stack = (Path(__file__).resolve().parents[2] / "Pulumi.prod.yaml").read_text(encoding="utf-8")
    (tmp_path / "Pulumi.prod.yaml").write_text(stack.replace("vmId: 4101", "vmId: 03101"), encoding="utf-8")
    err = io.StringIO()

    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = preview(["--stack", "prod", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet"])

    assert code == 1
    assert (
        f"{FD}[dc1].vmId: written 03101, which YAML reads as the octal number 1601: a leading zero makes an integer "
        "octal for the Pulumi CLI; write 3101"
    ) in err.getvalue()
    assert "Traceback" not in err.getvalue() and not (tmp_path / "out").exists()


def test_a_leading_zero_is_not_blamed_on_a_config_that_does_not_hold_its_number() -> None:
    from config.validate import number_problems

    text = "config:\n  gpu-pool:failureDomains:\n  - name: dc1\n    vmId: 03101\n"

    assert number_problems(text, {"failureDomains": [{"name": "dc1", "vmId": 1601}]})
    assert number_problems(text, {"failureDomains": [{"name": "dc1", "vmId": 3101}]}) == []


def test_sharing_written_as_a_number_names_the_profiles_and_points_at_replicas(
    run_stack_program: Run, prod_config, monitor
):
    prod_config[FD][2]["sharing"] = 4

    message = refused(run_stack_program, prod_config, monitor)

    assert (
        f"{FD}[dc3].sharing: names a sharing profile, not a number of slots (got 4): use one of "
        "gpu-pool:sharingProfiles (a1000-x4, whole); for 4 slots per card, sharing: a1000-x4"
    ) in message


def test_a_single_key_mistake_no_longer_hides_a_cross_key_one_in_the_same_domain(
    run_stack_program: Run, prod_config, monitor
):
    prod_config[FD][1]["gpu"]["pciAddress"] = "01:00.0"
    prod_config[FD][1]["hostname"] = prod_config[FD][0]["hostname"]

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc2].gpu.pciAddress: is lspci's short form" in message
    assert f"{FD}[dc2].hostname: 'rke2-worker-dc1-gpu-a' is already used by failureDomains[dc1]" in message


# --- storage and images ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ("local:iso/noble-server-cloudimg-amd64.img", "is a volume of content type 'iso'"),
        ("local:import/noble-server-cloudimg-amd64.img", "'noble-server-cloudimg-amd64.img' is not a disk image"),
        ("local:vztmpl/ubuntu-24.04-standard.tar.zst", "is a volume of content type 'vztmpl'"),
    ],
    ids=["an iso volume", "Ubuntu's .img in import", "a container template"],
)
def test_a_cloud_image_proxmox_cannot_import_a_disk_from_is_refused_with_the_volume_to_write(
    run_stack_program: Run, prod_config, monitor, image: str, says: str
):
    prod_config["gpu-pool:proxmox"]["cloudImage"] = image

    message = refused(run_stack_program, prod_config, monitor)

    assert f"gpu-pool:proxmox.cloudImage: {says}" in message
    assert ":import/" in message.split(says, 1)[1] and ".qcow2" in message.split(says, 1)[1]


@pytest.mark.parametrize("key", ["snippetsDatastore", "diskDatastore"])
def test_a_volume_where_a_datastore_goes_is_refused(run_stack_program: Run, prod_config, monitor, key: str):
    prod_config["gpu-pool:proxmox"][key] = "local:snippets"

    message = refused(run_stack_program, prod_config, monitor)

    assert f"gpu-pool:proxmox.{key}: names a volume or path, not a datastore" in message


# --- cards -----------------------------------------------------------------------------------------------------


def test_an_rtx_5090_on_r535_is_refused_with_the_driver_that_lists_it(run_stack_program: Run, prod_config, monitor):
    prod_config[FD][0]["gpu"].update(RTX_5090)
    prod_config["gpu-pool:gpuOperator"]["driverVersion"] = "535.309.01"

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc1].gpu.vendorDeviceId: 10de:2b85 (NVIDIA GeForce RTX 5090) is a Blackwell card (GB202)" in message
    assert "no R535 driver lists it (the first driver that does is 570.86.16)" in message
    assert "set driverVersion to 595.91.07" in message


def test_the_articles_a1000_on_r535_is_refused_too(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu-pool:gpuOperator"]["driverVersion"] = "535.309.01"

    message = refused(run_stack_program, prod_config, monitor)

    assert "10de:25b0 (NVIDIA RTX A1000) is an Ampere card (GA107GL)" in message
    assert "no R535 driver lists it (the first driver that does is 550.40.63)" in message


def test_a_blackwell_card_on_proprietary_modules_is_refused_with_open_as_the_fix(
    run_stack_program: Run, prod_config, monitor
):
    prod_config[FD][0]["gpu"].update(RTX_5090)
    prod_config["gpu-pool:gpuOperator"]["kernelModuleType"] = "proprietary"

    message = refused(run_stack_program, prod_config, monitor)

    assert "which only the open kernel modules drive" in message
    assert "set kernelModuleType to open (or auto, which picks open for it)" in message


def test_the_cards_hdmi_audio_function_is_refused_as_the_gpu(run_stack_program: Run, prod_config, monitor):
    prod_config[FD][1]["gpu"]["vendorDeviceId"] = "10de:2291"

    message = refused(run_stack_program, prod_config, monitor)

    assert (
        f"{FD}[dc2].gpu.vendorDeviceId: is the card's HDMI/DP audio controller (PCI class 0403) (GA107), not the GPU"
    ) in message


def test_a_blackwell_and_a_pascal_card_in_one_vm_are_refused_since_one_driver_cannot_load_both(
    run_stack_program: Run, prod_config, monitor
):
    first = {**prod_config[FD][0].pop("gpu"), **RTX_5090}
    second = {**first, "pciAddress": "0000:02:00", "iommuGroup": 15, "vendorDeviceId": "10de:1bb3", "model": "P4"}
    prod_config[FD][0].update(gpus=[first, second], sharing="whole")
    prod_config["gpu-pool:gpuOperator"]["driverVersion"] = "580.173.02"

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc1].gpus: gpus[0] (Blackwell) needs the open kernel modules and gpus[1] (Pascal)" in message


# --- secrets: quotes and whitespace, named by where they came from -------------------------------------------


def test_a_quoted_value_in_the_secrets_file_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    secrets = tmp_path / "lab.env"
    secrets.write_text('# lab\nRKE2TOKEN="K10abc::server:xyz"\nproxmoxApiToken=a@pve!t=1\n', encoding="utf-8")

    with pytest.raises(SecretSourceError) as raised:
        secrets_from_environment({"GPU_POOL_SECRETS_FILE": str(secrets)}, Path(__file__).resolve().parents[2])

    assert f"GPU_POOL_SECRETS_FILE={secrets}: line 2 (rke2Token) is wrapped in double quotes" in str(raised.value)
    assert "K10abc" not in str(raised.value)


def test_an_environment_secret_with_a_trailing_newline_is_refused_naming_the_variable() -> None:
    environ = {"GPU_POOL_SECRET_RKE2TOKEN": "K10" + "ab" * 32 + "::server:pw\n"}

    with pytest.raises(SecretSourceError) as raised:
        secrets_from_environment(environ, Path("/nonexistent"))

    assert "GPU_POOL_SECRET_RKE2TOKEN (the environment variable) starts or ends with whitespace" in str(raised.value)


def test_a_config_secret_wrapped_in_quotes_is_refused_without_its_value(run_stack_program: Run, prod_config, monitor):
    token = "K10" + "ab" * 32 + "::server:pw"

    message = refused(run_stack_program, prod_config, monitor, {"rke2Token": f"'{token}'"})

    assert "gpu-pool:rke2Token: the RKE2 join token is wrapped in single quotes" in message
    assert token not in message


# --- found by the new-user trial ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [("gpu-pool:gpuOperator", "kube-system"), ("gpu-pool:smokeTest", "default"), ("gpu-pool:smokeTest", "kube-public")],
)
def test_a_namespace_every_cluster_has_is_not_one_the_stack_may_create(
    run_stack_program: Run, prod_config, monitor, key: str, value: str
):
    prod_config.setdefault(key, {})["namespace"] = value

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{key}.namespace: {value!r} is a namespace every cluster has" in message


def test_the_smoke_namespace_excluded_from_kyverno_is_refused(run_stack_program: Run, prod_config, monitor):
    prod_config["gpu-pool:kyverno"] = {"excludedNamespaces": ["kube-system", "gpu-smoke-test"]}

    message = refused(run_stack_program, prod_config, monitor)

    assert "gpu-pool:kyverno.excludedNamespaces: 'gpu-smoke-test' is the smoke test's namespace" in message


@pytest.mark.parametrize("username", ["Ops", "1ops", "ops user", "x" * 33])
def test_a_user_name_useradd_refuses_is_refused(run_stack_program: Run, prod_config, monitor, username: str):
    prod_config[FD][0]["username"] = username

    message = refused(run_stack_program, prod_config, monitor)

    assert f"{FD}[dc1].username: is not a Linux user name useradd accepts" in message


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda c: c[FD][0]["gpu"].update(pciAddress="0000:01:00.1"), f"{FD}[dc1].gpu.pciAddress: names function .1"),
        (
            lambda c: c["gpu-pool:rke2"].update(serverUrl="https://rke2.lab.internal:9345/v1"),
            "gpu-pool:rke2.serverUrl: must be the server alone, https://rke2.lab.internal:9345",
        ),
        (
            lambda c: c["gpu-pool:proxmox"]["ssh"].update(username=""),
            "gpu-pool:proxmox.ssh.username: is not a user name",
        ),
        (
            lambda c: c["gpu-pool:proxmox"]["ssh"].update(nodeAddresses={"pve-dc1": "https://10.0.0.5:8006"}),
            "gpu-pool:proxmox.ssh.nodeAddresses: pve-dc1: 'https://10.0.0.5:8006' is not a host name or IP address",
        ),
        (
            lambda c: c.update({"gpu-pool:monitoring": {"dcgmExporterJob": "dcgm-exporter"}}),
            "gpu-pool:monitoring.dcgmExporterJob: 'dcgm-exporter' is not the job the operator's ServiceMonitor gives",
        ),
        (
            lambda c: c["gpu-pool:gpuQuotas"]["namespaces"].update({"gpu-operator": 0}),
            "gpu-pool:gpuQuotas.namespaces.gpu-operator: the operator's validator starts a pod asking a GPU there",
        ),
        (
            lambda c: c["gpu-pool:gpuQuotas"]["namespaces"].update({"gpu-smoke-test": 3}),
            "gpu-pool:gpuQuotas.namespaces.gpu-smoke-test: every domain's smoke Job asks a GPU there",
        ),
        (
            lambda c: c[FD][1]["gpu"].update(vendorDeviceId="10de:22a3"),
            f"{FD}[dc2].gpu.vendorDeviceId: is an NVSwitch (GH100), not the GPU",
        ),
    ],
    ids=[
        "the card's audio function as its address",
        "an RKE2 server URL with a path",
        "an empty Proxmox SSH user",
        "a URL as a node's SSH address",
        "an exporter job the ServiceMonitor never gives",
        "a GPU quota on the operator's namespace",
        "a GPU quota on the smoke test's namespace",
        "an NVSwitch as the card",
    ],
)
def test_the_second_trial_rounds_mistakes_are_refused_naming_the_key(
    run_stack_program: Run, prod_config, monitor, change: Any, says: str
):
    change(prod_config)

    assert says in refused(run_stack_program, prod_config, monitor)


# --- repair ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (0, "is 0, which would let `gpu-pool repair` never power-cycle a VM: give 1 to 24"),
        (25, "less than or equal to 24"),
        ("2", "expects a whole number (got '2')"),
    ],
    ids=["no power cycle at all", "more than one an hour", "quoted"],
)
def test_a_daily_repair_budget_outside_one_to_24_power_cycles_is_refused_naming_the_key(
    run_stack_program: Run, prod_config, monitor, value: Any, says: str
):
    prod_config["gpu-pool:repair"] = {"maxPerDay": value}

    message = refused(run_stack_program, prod_config, monitor)

    assert "gpu-pool:repair.maxPerDay" in message and says in message
