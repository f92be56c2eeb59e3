"""A proxy that asks for a login (`proxy.login` and the secret gpu-pool:proxyAuth, issue 50): the VMs get it in
root-only files only (the snippet's /etc/default/rke2-agent and apt's proxy file, or the files turn's standard
input), every command reads it from there, and the driver container gets it from a Secret (driver.secretEnv);
no plan text, Helm value or message holds it."""

from __future__ import annotations

import copy
import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.gpu_failure_domain.cloud_init import (
    APT_PROXY_FILE,
    RKE2_AGENT_ENV_FILE,
    SOURCE_AGENT_ENV,
    user_data_document,
)
from components.gpu_failure_domain.plan import nodes_by_domain, plan_domain, plan_wave, settled_nodes_of
from components.gpu_failure_domain.rollout import rke2_upgrade_command
from components.gpu_failure_domain.steps import RemoteStep
from components.gpu_platform.release_values import DRIVER_PROXY_SECRET, driver_proxy, release_values
from components.stack_check import validate_stack
from config.errors import ConfigError
from config.loader import proxy_login_notes, proxy_login_problems
from config.plain_credentials import split_userinfo
from config.stack import StackConfig
from offline.runner import read_stack_file
from tests.gpu_failure_domain.fake_vm import run_on_a_fake_vm
from tests.ssh_keys import TEST_PUBLIC_KEY

PROXY = "http://proxy.lab.internal:3128"
TOKEN = "K10" + "0" * 64 + "::server:test"
LOGIN = "svc-gpu:pa#ss@w/rd:x"


def _stack(proxy: dict[str, Any] | None) -> StackConfig:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    if proxy is not None:
        raw["proxy"] = proxy
    for domain in raw["failureDomains"]:
        domain["sshAuthorizedKeys"] = [TEST_PUBLIC_KEY]
    return validate_stack(raw)


WITH_LOGIN = {"https": PROXY, "http": PROXY, "login": True}


def _file(document: dict[str, Any], path: str) -> dict[str, str]:
    [file] = [f for f in document["write_files"] if f["path"] == path]
    return dict(file)


def _env(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_the_first_boot_reads_the_login_from_root_only_files_and_nowhere_else() -> None:
    stack = _stack(WITH_LOGIN)
    domain = stack.failure_domains[0]

    document = user_data_document(domain, stack.rke2, TOKEN, proxy=stack.proxy, proxy_auth=LOGIN)

    env, apt = _file(document, RKE2_AGENT_ENV_FILE), _file(document, APT_PROXY_FILE)
    assert env["permissions"] == apt["permissions"] == "0600"
    assert split_userinfo(_env(env["content"])["HTTPS_PROXY"]) == (PROXY, LOGIN)
    assert split_userinfo(_env(env["content"])["https_proxy"]) == (PROXY, LOGIN)
    assert "svc-gpu:pa%23ss%40w%2Frd%3Ax@proxy.lab.internal:3128" in apt["content"]
    # cloud-init writes its `apt:` proxy keys world-readable: not used with a login.
    assert "http_proxy" not in document.get("apt", {}) and "https_proxy" not in document.get("apt", {})
    assert document["runcmd"][0] == SOURCE_AGENT_ENV or SOURCE_AGENT_ENV in json.dumps(document["runcmd"])
    others = [f for f in document["write_files"] if f["path"] not in (RKE2_AGENT_ENV_FILE, APT_PROXY_FILE)]
    rest = json.dumps({**document, "write_files": others})
    assert "svc-gpu" not in rest and "pa%23ss" not in rest


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    user=st.text(alphabet=string.ascii_letters + string.digits + "-_.@", min_size=1),
    password=st.text(min_size=1).filter(lambda p: "\n" not in p and "\r" not in p and "\x00" not in p),
)
def test_any_login_reaches_the_agents_file_as_the_proxy_would_read_it_back(user: str, password: str) -> None:
    stack = _stack(WITH_LOGIN)

    document = user_data_document(
        stack.failure_domains[0], stack.rke2, TOKEN, proxy=stack.proxy, proxy_auth=f"{user}:{password}"
    )

    env = _env(_file(document, RKE2_AGENT_ENV_FILE)["content"])
    assert split_userinfo(env["HTTPS_PROXY"]) == (PROXY, f"{user}:{password}")


def test_a_files_turn_writes_the_login_from_its_standard_input_and_its_command_holds_none(tmp_path: Path) -> None:
    before, after = _stack(None), _stack(WITH_LOGIN)
    wave = plan_wave(after, nodes_by_domain(after, settled_nodes_of(before)))
    plan = plan_domain(after.failure_domains[0], after, wave.turns[after.failure_domains[0].name])
    step = plan.step_of("rke2-files", RemoteStep)

    assert "svc-gpu" not in step.command.create and "proxy.lab.internal" not in step.command.create
    assert step.command.stdin_from_registry_auth is not None
    run_on_a_fake_vm(step.command.create, tmp_path, step.command.stdin_from_registry_auth(None, LOGIN))
    written = tmp_path / RKE2_AGENT_ENV_FILE.lstrip("/")
    assert split_userinfo(_env(written.read_text())["HTTPS_PROXY"]) == (PROXY, LOGIN)
    assert oct(written.stat().st_mode & 0o777) == "0o600"
    apt = tmp_path / APT_PROXY_FILE.lstrip("/")
    assert "svc-gpu:" in apt.read_text() and oct(apt.stat().st_mode & 0o777) == "0o600"


def test_the_upgrade_step_reads_the_proxy_as_root_from_the_agents_file_not_its_command_line() -> None:
    command = rke2_upgrade_command("v1.33.6+rke2r1", {"HTTPS_PROXY": PROXY}, from_agent_env=True)

    assert PROXY not in command
    assert f". {RKE2_AGENT_ENV_FILE}" in command and command.count("sudo sh -c") == 1


def test_the_driver_gets_the_proxy_from_a_secret_and_driver_env_holds_no_proxy_variable() -> None:
    stack = _stack(WITH_LOGIN)
    env, secret = driver_proxy(stack.proxy, stack.rke2)

    values = release_values(
        stack.gpu_operator, stack.kyverno, stack.monitoring, driver_env=env, driver_secret_env=secret
    )

    assert values["driver"]["secretEnv"] == DRIVER_PROXY_SECRET
    assert not any("PROXY" in item["name"].upper() for item in values["driver"].get("env", []))


@pytest.mark.parametrize(
    "url",
    [f"http://svc-gpu:{'canary-pw'}@proxy.lab:3128", "http://svc-gpu:canary#pw@proxy.lab:3128", "http://canary-pw@p:1"],
)
def test_a_login_in_a_proxy_url_is_refused_with_the_fix_and_never_shown(url: str) -> None:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    raw["proxy"] = {"https": url}

    with pytest.raises(ConfigError) as refused:
        validate_stack(raw)

    said = "\n".join(refused.value.messages)
    assert "canary" not in said
    assert "gpu-pool:proxy.https: carries a login" in said and "gpu-pool:proxyAuth" in said


def test_the_login_and_proxy_login_come_together() -> None:
    assert proxy_login_problems({"login": True}, set()) == [
        "gpu-pool:proxyAuth: secret not set (gpu-pool:proxy.login is true: the proxy's login, user:password); run: "
        "pulumi config set --secret gpu-pool:proxyAuth <value>"
    ]
    assert "set `login: true`" in proxy_login_notes({"https": PROXY}, {"proxyAuth"})[0]
    assert proxy_login_problems({"login": True}, {"proxyAuth"}) == []


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        (
            {"driver": {"env": [{"name": "HTTPS_PROXY", "value": "http://svc:canary-pw@proxy:3128"}]}},
            "driver.env[0].value",
        ),
        ({"driver": {"repoConfig": {"password": "canary-pw"}}}, "driver.repoConfig.password"),
        (
            {"validator": {"env": [{"name": "NGC_API_TOKEN", "value": "x"}], "apiToken": "canary-pw"}},
            "validator.apiToken",
        ),
    ],
)
def test_a_credential_in_the_charts_extra_values_is_refused_naming_its_path_not_its_value(
    extra: dict[str, Any], path: str
) -> None:
    raw = {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}
    raw["gpuOperator"]["extraValues"] = extra

    with pytest.raises(ConfigError) as refused:
        validate_stack(raw)

    said = "\n".join(refused.value.messages)
    assert f"'{path}' holds a credential (value not shown)" in said and "canary" not in said
