"""The deployed half of the canary test (issue 50; the offline half is tests/test_canaries.py): prod as the shared
`deployed` stack is (tests/e2e/engine_deployed.py), but behind a proxy that asks for a login, given as the secret
gpu-pool:proxyAuth (tests/e2e/engine_stacks.py SECRETS): the `behind_proxy` stack, on a control plane of its own
(tests/e2e/conftest.py says why not the shared one). After the real `pulumi up`:

- the VM gets the login: its cloud-init snippet, on the Proxmox stand-in's datastore (the allowed place, root-only
  on a real host), writes it into /etc/default/rke2-agent and apt's proxy file (0600) and every command reads it
  from there;
- the driver container gets it: the GPU Operator's own controller (v26.7.0, from source) read `driver.secretEnv`
  from the ClusterPolicy the chart made and added the Secret to the driver container as envFrom, with no proxy
  variable in its env;
- nothing else shows it: not the engine's state (unless asked with --show-secrets), the stack file, `up`'s output,
  the engine's logs, the Helm release, nor any object in the cluster but that Secret;
- `gpu-pool claims --usage` reads a real Prometheus that asks for basic auth (its web config's basic_auth_users), the
  password from the environment, and prints none of it.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from components.gpu_failure_domain.cloud_init import APT_PROXY_FILE, RKE2_AGENT_ENV_FILE, SOURCE_AGENT_ENV
from components.gpu_platform.release_values import DRIVER_PROXY_SECRET
from config.plain_credentials import split_userinfo
from config.secrets import PROMETHEUS_PASSWORD_ENV
from day2.cli import main
from knowledge.gpu_operator import DRIVER_APP, DRIVER_CONTAINER
from tests.day2.prometheus_server import running_prometheus
from tests.e2e.engine_deployed import PROXY, Deployed
from tests.e2e.engine_stacks import SECRETS
from tests.gpu_platform.prometheus_tools import require

LOGIN = SECRETS["proxyAuth"]
PASSWORD = LOGIN.partition(":")[2]
SNIPPETS = ("local", "snippets")
PROMETHEUS_PASSWORD = "e2e-prometheus-canary#3"


def _operator_namespace(behind_proxy: Deployed) -> str:
    return str(behind_proxy.base["gpu-pool:gpuOperator"].get("namespace", "gpu-operator"))


def _snippet(behind_proxy: Deployed, host: str) -> dict[str, Any]:
    path = behind_proxy.pve.state.storage_dir.joinpath(*SNIPPETS, f"{host}-user-data.yaml")
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def _found(text: str) -> bool:
    """The password raw, percent-encoded (a URL's login) or in base64 (a Secret's data, a Basic header)."""
    forms = {PASSWORD, quote(PASSWORD, safe=""), base64.b64encode(PASSWORD.encode()).decode()[:-4]}
    return any(form in text for form in forms)


def test_the_vm_gets_the_login_in_root_only_files_of_its_snippet_and_reads_it_from_there(
    behind_proxy: Deployed,
) -> None:
    for domain in behind_proxy.base["gpu-pool:failureDomains"]:
        snippet = _snippet(behind_proxy, domain["hostname"])
        files = {file["path"]: file for file in snippet["write_files"]}

        env = dict(line.split("=", 1) for line in files[RKE2_AGENT_ENV_FILE]["content"].splitlines())
        assert split_userinfo(env["HTTPS_PROXY"]) == (PROXY, LOGIN)
        assert files[RKE2_AGENT_ENV_FILE]["permissions"] == files[APT_PROXY_FILE]["permissions"] == "0600"
        assert SOURCE_AGENT_ENV in json.dumps(snippet["runcmd"])
        assert "http_proxy" not in snippet.get("apt", {}), "cloud-init writes its apt proxy keys world-readable"


def test_the_operator_gives_the_driver_container_the_login_from_the_secret_and_its_env_holds_no_proxy(
    behind_proxy: Deployed,
) -> None:
    kubectl, namespace = behind_proxy.plane.kubectl, _operator_namespace(behind_proxy)

    policy = kubectl.json("get", "clusterpolicies.nvidia.com", "cluster-policy")
    assert policy["spec"]["driver"]["secretEnv"] == DRIVER_PROXY_SECRET
    [daemonset] = kubectl.json("-n", namespace, "get", "daemonsets", "-l", f"app={DRIVER_APP}")["items"]
    [driver] = [c for c in daemonset["spec"]["template"]["spec"]["containers"] if c["name"] == DRIVER_CONTAINER]
    assert {"secretRef": {"name": DRIVER_PROXY_SECRET}} in driver.get("envFrom", [])
    assert not [e["name"] for e in driver.get("env", []) if "proxy" in e["name"].lower()]
    secret = kubectl.json("-n", namespace, "get", "secret", DRIVER_PROXY_SECRET)
    data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert split_userinfo(data["HTTPS_PROXY"]) == (PROXY, LOGIN) and split_userinfo(data["http_proxy"])[1] == LOGIN


def _helm_release_values(secret: dict[str, Any]) -> str:
    """A Helm release Secret's release, decoded as Helm stores it (base64 of base64 of gzip of JSON)."""
    raw = base64.b64decode(base64.b64decode(secret["data"]["release"]))
    return gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()


def test_the_login_is_nowhere_else_in_the_state_the_output_or_the_cluster(behind_proxy: Deployed) -> None:
    stack, kubectl = behind_proxy.stack, behind_proxy.plane.kubectl
    places = {
        "the state backend": stack.state_text(),
        "stack export": stack.run("stack", "export").stdout,
        "the stack file": stack.stack_file.read_text(),
        "the first pulumi up's output": behind_proxy.first_up,
        "pulumi preview --diff": stack.run("preview", "--diff", "--show-sames").stdout,
    }
    for log in (stack.work / "pulumi-home").rglob("*.log"):
        places[str(log)] = log.read_text(errors="replace")
    objects = kubectl.json("get", "secrets,configmaps,daemonsets,deployments,pods,events", "-A")
    policy = kubectl.json("get", "clusterpolicies.nvidia.com")
    for item in [*objects["items"], *policy["items"]]:
        meta = item["metadata"]
        if item["kind"] == "Secret" and meta["name"] == DRIVER_PROXY_SECRET:
            continue  # the allowed place
        where = f"{item['kind']} {meta.get('namespace', '')}/{meta['name']}"
        places[where] = json.dumps(item)
        if item["kind"] == "Secret" and item.get("type") == "helm.sh/release.v1":
            places[f"{where} (decoded)"] = _helm_release_values(item)

    assert [where for where, text in places.items() if _found(text)] == []
    # Kept, encrypted: the state holds it as the URLs carry it (percent-encoded), shown only when asked.
    assert quote(PASSWORD, safe="") in stack.run("stack", "export", "--show-secrets").stdout


@pytest.fixture(scope="module")
def prometheus_with_login(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("prometheus-login")
    with running_prometheus(
        require("prometheus"), directory / "data", directory, basic_auth=("admin", PROMETHEUS_PASSWORD)
    ) as url:
        yield url


def test_claims_usage_reads_the_live_cluster_and_a_prometheus_that_asks_for_basic_auth(
    behind_proxy: Deployed, prometheus_with_login: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = str(behind_proxy.plane.kubeconfig)
    argv = ["claims", "--usage", "--kubeconfig", kubeconfig, "--prometheus", prometheus_with_login, "-o", "json"]

    refused_out, refused_err = io.StringIO(), io.StringIO()
    refused = main(argv, out=refused_out, err=refused_err)
    monkeypatch.setenv(PROMETHEUS_PASSWORD_ENV, PROMETHEUS_PASSWORD)
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--prometheus-user", "admin"], out=out, err=err)

    assert refused == 2 and "asks for a login" in refused_err.getvalue()
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue())["namespaces"] == []  # a Prometheus with no data yet: nothing held
    printed = refused_out.getvalue() + refused_err.getvalue() + out.getvalue() + err.getvalue()
    assert PROMETHEUS_PASSWORD not in printed


def test_the_stack_files_secrets_are_ciphertexts(behind_proxy: Deployed) -> None:
    written = yaml.safe_load(Path(behind_proxy.stack.stack_file).read_text())["config"]
    assert set(written["gpu-pool:proxyAuth"]) == {"secure"}
