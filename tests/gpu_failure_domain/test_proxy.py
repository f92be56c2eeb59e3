"""A lab behind an HTTP(S) proxy (`gpu-pool:proxy`): every place that downloads gets it, and the cluster stays off
it. The first boot's cloud-init (RKE2's /etc/default/rke2-agent, the installer's environment, apt's proxy keys,
checked by `cloud-init schema`), the RKE2 upgrade step and the GPU Operator's driver container."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.cloud_init import RKE2_AGENT_ENV_FILE, build_user_data, user_data_document
from components.gpu_failure_domain.rollout import rke2_upgrade_command
from components.gpu_platform.release_values import release_values
from components.stack_check import validate_stack
from config.errors import ConfigError
from config.proxy import proxy_environment, subnet_of
from config.stack import StackConfig
from offline.runner import read_stack_file

PROXY = "http://proxy.lab.internal:3128"
TOKEN = "K10" + "0" * 64 + "::server:test"


def _stack(proxy: dict[str, Any] | None = None, **rke2: str) -> StackConfig:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    if proxy is not None:
        raw["proxy"] = proxy
    raw["rke2"].update(rke2)
    return validate_stack(raw)


def _env_file(document: dict[str, Any]) -> dict[str, str]:
    [file] = [f for f in document["write_files"] if f["path"] == RKE2_AGENT_ENV_FILE]
    assert file["permissions"] == "0600"
    return dict(line.split("=", 1) for line in file["content"].splitlines())


def test_the_agent_the_installer_and_apt_get_the_proxy_and_no_proxy_keeps_the_cluster_inside() -> None:
    stack = _stack({"http": PROXY, "https": PROXY, "noProxy": [".lab.internal", "10.99.0.0/16"]})
    domain = stack.failure_domains[0]

    document = user_data_document(domain, stack.rke2, TOKEN, proxy=stack.proxy)

    env = _env_file(document)
    assert env["HTTP_PROXY"] == env["https_proxy"] == PROXY
    no_proxy = env["NO_PROXY"].split(",")
    subnet = subnet_of(domain.network.ipv4)
    assert subnet is not None
    for inside in ("10.42.0.0/16", "10.43.0.0/16", ".svc", ".cluster.local", "localhost", "127.0.0.1", subnet):
        assert inside in no_proxy
    assert "10.99.0.0/16" in no_proxy and ".lab.internal" in no_proxy
    assert env["no_proxy"] == env["NO_PROXY"]
    assert document["apt"] == {"http_proxy": PROXY, "https_proxy": PROXY}
    runcmd: list[str] = document["runcmd"]
    exported = next(
        i for i, line in enumerate(runcmd) if line.startswith("export HTTPS_PROXY") or "HTTPS_PROXY=" in line
    )
    assert exported < next(i for i, line in enumerate(runcmd) if line.startswith("curl "))


def test_the_clusters_own_cidrs_are_the_ones_the_stack_names() -> None:
    stack = _stack({"https": PROXY}, clusterCidr="10.244.0.0/16", serviceCidr="10.96.0.0/12")

    env = proxy_environment(stack.proxy, stack.rke2)

    assert env["NO_PROXY"].startswith("10.244.0.0/16,10.96.0.0/12,")
    assert "HTTP_PROXY" not in env


def test_without_a_proxy_the_first_boot_is_what_it_was() -> None:
    stack = _stack()
    document = user_data_document(stack.failure_domains[0], stack.rke2, TOKEN, proxy=stack.proxy)

    assert "apt" not in document
    assert RKE2_AGENT_ENV_FILE not in [f["path"] for f in document["write_files"]]
    assert not any("PROXY" in line for line in document["runcmd"])


def test_the_installers_environment_is_the_shells_and_survives_sudo_in_the_upgrade_step() -> None:
    env = {"HTTPS_PROXY": "http://user:p@ss w'rd@proxy:3128", "NO_PROXY": "10.42.0.0/16,.svc"}

    command = rke2_upgrade_command("v1.33.5+rke2r1", env)

    assert "sudo env HTTPS_PROXY=" in command
    # The quoting holds: a shell that runs the assignments sees exactly the values.
    probe = command.split("; ")[1].split(" curl ")[0]
    said = subprocess.run(
        ["bash", "-c", f"{probe} bash -c 'echo \"$HTTPS_PROXY|$NO_PROXY\"'"], capture_output=True, text=True
    )
    assert said.stdout.strip() == f"{env['HTTPS_PROXY']}|{env['NO_PROXY']}"


def test_the_driver_container_downloads_through_the_proxy() -> None:
    stack = _stack({"https": PROXY})

    values = release_values(
        stack.gpu_operator, stack.kyverno, stack.monitoring, driver_env=proxy_environment(stack.proxy, stack.rke2)
    )

    names = {e["name"]: e["value"] for e in values["driver"]["env"]}
    assert names["HTTPS_PROXY"] == PROXY and "10.42.0.0/16" in names["NO_PROXY"]


@pytest.mark.parametrize(
    ("proxy", "rke2", "said"),
    [
        ({"https": "proxy.lab:3128"}, {}, "gpu-pool:proxy.https: 'proxy.lab:3128' is not a proxy URL"),
        ({"https": "http://proxy.lab"}, {}, "gpu-pool:proxy.https: 'http://proxy.lab' names no port"),
        ({"noProxy": ["a.lab, b.lab"]}, {}, "gpu-pool:proxy.noProxy: 'a.lab, b.lab': one host, domain or CIDR"),
        ({}, {"clusterCidr": "10.42.0.1/16"}, "gpu-pool:rke2.clusterCidr: '10.42.0.1/16' is not a CIDR"),
    ],
)
def test_a_proxy_or_cidr_the_node_could_not_use_is_refused_naming_the_key(
    proxy: dict[str, Any], rke2: dict[str, str], said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _stack(proxy, **rke2)

    assert any(m.startswith(said) for m in caught.value.messages), caught.value.messages


def test_cloud_init_itself_validates_the_user_data_of_a_stack_behind_a_proxy(tmp_path: Path) -> None:
    cloud_init = shutil.which("cloud-init")
    if cloud_init is None:
        pytest.skip("cloud-init is not installed (Debian's cloud-init package; .ci/run installs it)")
    stack = _stack({"http": PROXY, "https": PROXY, "noProxy": [".lab.internal"]})
    for domain in stack.failure_domains:
        text = build_user_data(domain, stack.rke2, TOKEN, proxy=stack.proxy)
        assert yaml.safe_load(text)["apt"]["https_proxy"] == PROXY
        (tmp_path / "user-data").write_text(text)

        checked = subprocess.run(
            [cloud_init, "schema", "--config-file", str(tmp_path / "user-data")], capture_output=True, text=True
        )

        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "Valid cloud-config" in checked.stdout


def _with_mirrors(mirrors: Any) -> StackConfig:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    raw["registryMirrors"] = mirrors
    return validate_stack(raw)


def test_registry_mirrors_reach_rke2s_registries_yaml_on_first_boot_and_cloud_init_takes_them(tmp_path: Path) -> None:
    mirrors = {"docker.io": ["https://mirror.lab.internal:5000"], "*": ["https://harbor.lab.internal"]}
    stack = _with_mirrors(mirrors)

    document = user_data_document(stack.failure_domains[0], stack.rke2, TOKEN, mirrors=stack.registry_mirrors)

    [file] = [f for f in document["write_files"] if f["path"] == "/etc/rancher/rke2/registries.yaml"]
    assert file["permissions"] == "0600"
    assert yaml.safe_load(file["content"]) == {
        "mirrors": {
            "docker.io": {"endpoint": ["https://mirror.lab.internal:5000"]},
            "*": {"endpoint": ["https://harbor.lab.internal"]},
        }
    }
    cloud_init = shutil.which("cloud-init")
    if cloud_init is not None:
        (tmp_path / "user-data").write_text(
            build_user_data(stack.failure_domains[0], stack.rke2, TOKEN, mirrors=mirrors)
        )
        checked = subprocess.run(
            [cloud_init, "schema", "--config-file", str(tmp_path / "user-data")], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("mirrors", "said"),
    [
        ({"https://docker.io": ["https://m.lab"]}, "'https://docker.io' is not a registry name"),
        ({"docker.io": []}, "docker.io: give at least one endpoint"),
        ({"docker.io": ["mirror.lab:5000"]}, "docker.io: 'mirror.lab:5000' is not an endpoint URL"),
    ],
)
def test_a_mirror_rke2_could_not_use_is_refused_naming_the_key(mirrors: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _with_mirrors(mirrors)

    assert any(m.startswith("gpu-pool:registryMirrors") and said in m for m in caught.value.messages), (
        caught.value.messages
    )
