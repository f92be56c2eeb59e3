"""A lab behind an HTTP(S) proxy (`gpu-pool:proxy`): every place that downloads gets it, and the cluster stays off
it. The first boot's cloud-init (RKE2's /etc/default/rke2-agent, the installer's environment, apt's proxy keys,
checked by `cloud-init schema`), the RKE2 upgrade step and the GPU Operator's driver container."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.cloud_init import RKE2_AGENT_ENV_FILE, build_user_data, user_data_document
from components.gpu_failure_domain.plan import DomainPlan, nodes_by_domain, plan_domain, plan_wave, settled_nodes_of
from components.gpu_failure_domain.rollout import CHANGE_KEYS, rke2_upgrade_command, rollout_state
from components.gpu_failure_domain.steps import RemoteStep
from components.gpu_failure_domain.turns import Wave
from components.gpu_platform.release_values import release_values
from components.stack_check import validate_stack
from config.errors import ConfigError
from config.proxy import proxy_environment, subnet_of
from config.secrets import BY_KEY
from config.stack import StackConfig
from offline.runner import read_stack_file
from tests.gpu_failure_domain.fake_vm import run_on_a_fake_vm, systemctl_calls
from tests.ssh_keys import TEST_PUBLIC_KEY

PROXY = "http://proxy.lab.internal:3128"
TOKEN = "K10" + "0" * 64 + "::server:test"


def _stack(
    proxy: dict[str, Any] | None = None,
    *,
    keys: bool = False,
    mirrors: dict[str, list[str]] | None = None,
    rke2: dict[str, str] | None = None,
) -> StackConfig:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    if proxy is not None:
        raw["proxy"] = proxy
    if mirrors is not None:
        raw["registryMirrors"] = mirrors
    if keys:
        for domain in raw["failureDomains"]:
            domain["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
    raw["rke2"].update(rke2 or {})
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
    assert exported < next(i for i, line in enumerate(runcmd) if "fetch-installer" in line)


def test_the_clusters_own_cidrs_are_the_ones_the_stack_names() -> None:
    stack = _stack({"https": PROXY}, rke2={"clusterCidr": "10.244.0.0/16", "serviceCidr": "10.96.0.0/12"})

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
        _stack(proxy, rke2=rke2)

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
    mirrors = {"docker.io": ["http://mirror.lab.internal:5000"], "*": ["http://harbor.lab.internal"]}
    stack = _with_mirrors(mirrors)

    document = user_data_document(stack.failure_domains[0], stack.rke2, TOKEN, mirrors=stack.registry_mirrors)

    [file] = [f for f in document["write_files"] if f["path"] == "/etc/rancher/rke2/registries.yaml"]
    assert file["permissions"] == "0600"
    assert yaml.safe_load(file["content"]) == {
        "mirrors": {
            "docker.io": {"endpoint": ["http://mirror.lab.internal:5000"]},
            "*": {"endpoint": ["http://harbor.lab.internal"]},
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


# ------------------------------------------------------------------------------ a proxy or mirrors added later


def _run_on_a_fake_vm(command: str, root: Path, stdin: str = "") -> list[str]:
    run_on_a_fake_vm(command, root, stdin)
    return systemctl_calls(root)


def _files_turn(before: StackConfig, after: StackConfig) -> tuple[Wave, DomainPlan]:
    wave = plan_wave(after, nodes_by_domain(after, settled_nodes_of(before)))
    return wave, plan_domain(after.failure_domains[0], after, wave.turns[after.failure_domains[0].name])


def test_mirrors_and_a_proxy_added_to_existing_domains_are_a_wave_that_writes_the_files_and_restarts_the_agent(
    tmp_path: Path,
) -> None:
    before = _stack(keys=True)
    after = _stack({"https": PROXY}, keys=True, mirrors={"docker.io": ["http://mirror.lab.internal:5000"]})

    wave, plan = _files_turn(before, after)

    assert wave.batches == [[d.name] for d in after.failure_domains]
    assert plan.turn.kind == "roll" and plan.turn.changes == ("driver-template", "files")
    step = plan.step_of("rke2-files", RemoteStep)
    assert step.waits_for == ("wave-drain",)
    assert step.command.stdin_from_registry_auth is not None
    stdin = step.command.stdin_from_registry_auth(None)
    assert run_on_a_fake_vm(step.command.create, tmp_path, stdin).returncode == 0
    assert systemctl_calls(tmp_path) == ["restart rke2-agent"]
    expected = user_data_document(
        after.failure_domains[0], after.rke2, TOKEN, proxy=after.proxy, mirrors=after.registry_mirrors
    )
    for file in expected["write_files"]:
        if file["path"] in (RKE2_AGENT_ENV_FILE, "/etc/rancher/rke2/registries.yaml"):
            written = tmp_path / file["path"].lstrip("/")
            assert written.read_text() == file["content"]
            assert oct(written.stat().st_mode & 0o777) == "0o600"
    apt = (tmp_path / "etc/apt/apt.conf.d/90cloud-init-aptproxy").read_text()
    assert apt == f'Acquire::https::Proxy "{PROXY}";\n'


def test_a_proxy_taken_out_of_the_stack_is_a_turn_that_removes_its_files(tmp_path: Path) -> None:
    before = _stack({"https": PROXY}, keys=True)
    _, plan = _files_turn(before, _stack(keys=True))

    assert plan.turn.changes == ("driver-template", "files")
    left = tmp_path / "etc/default/rke2-agent"
    left.parent.mkdir(parents=True)
    left.write_text("HTTPS_PROXY=old\n")
    _run_on_a_fake_vm(plan.step_of("rke2-files", RemoteStep).command.create, tmp_path)
    assert not left.exists()


def test_a_stack_without_a_proxy_or_mirrors_records_and_plans_what_it_did_before() -> None:
    stack = _stack(keys=True)
    # The record written on the Node has no `files` key, so Nodes recorded before it existed see no change.
    assert set(rollout_state(stack.failure_domains[0], stack)) == set(CHANGE_KEYS) - {"files"}
    wave, _ = _files_turn(stack, stack)
    assert not wave.changes


AUTH = '{"mirror.lab.internal:5000": {"auth": {"username": "robot", "password": "s3cr\'et \\"x\\""}}}'


def test_registry_credentials_land_under_configs_in_the_snippet_and_the_files_turn_as_rke2_reads_them(
    tmp_path: Path,
) -> None:
    mirrors = {"docker.io": ["http://mirror.lab.internal:5000"]}
    before, after = _stack(keys=True), _stack(keys=True, mirrors=mirrors)
    document = user_data_document(after.failure_domains[0], after.rke2, TOKEN, mirrors=mirrors, registry_auth=AUTH)
    [file] = [f for f in document["write_files"] if f["path"] == "/etc/rancher/rke2/registries.yaml"]
    expected = {"mirrors": {"docker.io": {"endpoint": mirrors["docker.io"]}}, "configs": json.loads(AUTH)}
    assert yaml.safe_load(file["content"]) == expected
    # Each credential appears as one of the texts the secret's row says it is written as, which the preview's
    # redaction replaces with the secret's marker: none is left after that.
    text = build_user_data(after.failure_domains[0], after.rke2, TOKEN, mirrors=mirrors, registry_auth=AUTH)
    for part in sorted(BY_KEY["registryAuth"].written_parts(AUTH), key=len, reverse=True):
        text = text.replace(part, "<secret>")
    assert "robot" not in text and "s3cr" not in text

    _, plan = _files_turn(before, after)
    step = plan.step_of("rke2-files", RemoteStep)
    render = step.command.stdin_from_registry_auth
    assert render is not None and "robot" not in step.command.create
    _run_on_a_fake_vm(step.command.create, tmp_path, stdin=render(AUTH))
    written = tmp_path / "etc/rancher/rke2/registries.yaml"
    assert written.read_text() == file["content"]
    assert oct(written.stat().st_mode & 0o777) == "0o600"


def test_registry_credentials_without_mirrors_are_written_alone_by_a_files_turn(tmp_path: Path) -> None:
    _, plan = _files_turn(_stack(keys=True), _stack({"https": PROXY}, keys=True))
    step = plan.step_of("rke2-files", RemoteStep)
    assert step.command.stdin_from_registry_auth is not None
    _run_on_a_fake_vm(step.command.create, tmp_path, stdin=step.command.stdin_from_registry_auth(AUTH))
    assert yaml.safe_load((tmp_path / "etc/rancher/rke2/registries.yaml").read_text()) == {
        "mirrors": {},
        "configs": json.loads(AUTH),
    }


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("robot:password", "is not JSON"),
        ('{"h": {"username": "u", "password": "p"}}', 'h: give {"auth": {...}} and/or {"tls": {...}}'),
        ('{"h": {"auth": {"user": "u"}}}', "h.auth: takes non-empty strings of username, password, auth, "),
        ('{"h": {"auth": {"username": "u"}}}', "h.auth: give username and password together"),
        ('{"h":\n {"auth": {"auth": "x"}}}', "has a line break"),
    ],
)
def test_registry_credentials_rke2_could_not_read_are_refused_without_showing_them(value: str, said: str) -> None:
    problem = BY_KEY["registryAuth"].shape(value)
    assert problem is not None and problem.startswith(said), problem
    assert "password" not in value or '"p"' not in problem
