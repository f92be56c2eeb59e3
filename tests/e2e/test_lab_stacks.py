"""Labs as they are (docs/air-gap.md): a lab behind a proxy and a lab with no route out, each with registry mirrors,
an apt mirror and an installer mirror, preview offline, and the real API server accepts every Kubernetes object
they render: the stack's own manifests (the apt sources ConfigMap among them) and everything the GPU Operator chart
renders from the release's values, whose stored ClusterPolicy carries the proxy for the driver container (joined to
the user's own `driver.env`), the mirror's package sources and the lab's CA (`driver.certConfig`)."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.gpu_platform.apt_sources import APT_SOURCES_CONFIGMAP, APT_SOURCES_KEY
from components.gpu_platform.trusted_ca import TRUSTED_CA_CONFIGMAP, TRUSTED_CA_KEY
from config.proxy import proxy_environment
from offline.runner import PROJECT, read_stack_file
from tests.e2e.chart import Rendered, package_chart, render_release
from tests.e2e.kube import Kubectl, load_documents
from tests.e2e.nodes import rejected_manifests
from tests.e2e.servers import Tools
from tests.e2e.stacks import Previewed, run_preview
from tests.lab_ca import make_lab_ca

PROXY = "http://proxy.lab.internal:3128"
APT_MIRROR = "http://apt.lab.internal/ubuntu"
INSTALLER = {
    "script": "https://files.lab.internal/rke2/install.sh",
    "artifacts": "https://files.lab.internal/rke2/releases",
}
REGISTRY_MIRRORS = {
    "docker.io": ["https://mirror.lab.internal:5000"],
    "nvcr.io": ["https://mirror.lab.internal:5000"],
    "*": ["https://harbor.lab.internal"],
}
LABS = ("proxied", "air-gapped")
# The user's own variable for the driver container, beside the proxy's (Helm replaces lists: gpu-pool joins them).
OWN_DRIVER_ENV = {"name": "GPU_POOL_E2E_OWN", "value": "kept"}


def lab_config(lab: str, trusted_ca: str) -> dict[str, Any]:
    """prod with every egress setting docs/air-gap.md shows, the lab's CA among them: a proxy for the proxied lab,
    `airGapped` and a chart from the lab for the other (the two exclude each other: a proxy is a route out)."""
    config = copy.deepcopy(read_stack_file("prod"))
    key = f"{PROJECT}:"
    config[key + "registryMirrors"] = REGISTRY_MIRRORS
    config[key + "trustedCa"] = trusted_ca
    config[key + "aptMirror"] = {"uri": APT_MIRROR, "securityUri": APT_MIRROR}
    config[key + "rke2"] = {**config[key + "rke2"], "installer": INSTALLER}
    operator = config.get(key + "gpuOperator", {})
    if lab == "proxied":
        config[key + "proxy"] = {"http": PROXY, "https": PROXY, "noProxy": [".lab.internal"]}
        extra = operator.get("extraValues", {})
        config[key + "gpuOperator"] = {**operator, "extraValues": {**extra, "driver": {"env": [OWN_DRIVER_ENV]}}}
    else:
        config[key + "airGapped"] = True
        config[key + "gpuOperator"] = {**operator, "chartRepository": "https://files.lab.internal/charts"}
    return config


@pytest.fixture(scope="module", params=LABS)
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Previewed:
    name = f"e2e-lab-{request.param}"
    ca = make_lab_ca(tmp_path_factory.mktemp("lab-ca"))
    return run_preview(name, lab_config(request.param, ca.pem), tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def lab_chart(
    lab: Previewed,
    e2e_tools: Tools,
    kubectl: Kubectl,
    crds: list[str],
    upstream: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Rendered:
    archive = package_chart(e2e_tools, upstream, tmp_path_factory.mktemp("chart"))
    return render_release(lab, e2e_tools, kubectl, archive, tmp_path_factory.mktemp("lab-chart"))


@pytest.mark.usefixtures("crds")
def test_the_api_server_accepts_every_object_a_lab_stack_applies(lab: Previewed, kubectl: Kubectl) -> None:
    documents = [doc for path in lab.manifests() for doc in load_documents(path.read_text())]
    [sources] = [d for d in documents if (d["kind"], d["metadata"]["name"]) == ("ConfigMap", APT_SOURCES_CONFIGMAP)]
    assert f"URIs: {APT_MIRROR}" in sources["data"][APT_SOURCES_KEY]
    [trusted] = [d for d in documents if (d["kind"], d["metadata"]["name"]) == ("ConfigMap", TRUSTED_CA_CONFIGMAP)]
    assert trusted["data"][TRUSTED_CA_KEY] == lab.config.trusted_ca
    problems = rejected_manifests(kubectl, lab)
    assert not problems, "the API server rejected:\n" + "\n".join(problems)


def test_the_api_server_accepts_everything_the_chart_renders_for_a_lab(lab_chart: Rendered) -> None:
    assert not lab_chart.problems, "the API server rejected:\n" + "\n".join(lab_chart.problems)
    assert len(lab_chart.stored) == len(lab_chart.objects)


def test_the_stored_cluster_policy_gives_the_driver_container_the_proxy_and_the_mirrors_sources(
    lab_chart: Rendered,
) -> None:
    driver = lab_chart.find("ClusterPolicy", "cluster-policy", stored=True)["spec"]["driver"]
    assert driver["repoConfig"] == {"configMapName": APT_SOURCES_CONFIGMAP}
    assert driver["certConfig"] == {"name": TRUSTED_CA_CONFIGMAP}
    env = {item["name"]: item.get("value") for item in driver.get("env", [])}
    config = lab_chart.stack.config
    if config.proxy is None or not config.proxy.enabled:
        # No route out: nothing points the driver at a proxy.
        assert not {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} & set(env)
        return
    # What the VMs get (the cluster's own CIDRs and names kept off the proxy), as the API server stored it.
    expected = proxy_environment(config.proxy, config.rke2)
    assert {name: env.get(name) for name in expected} == expected
    assert env["HTTPS_PROXY"] == PROXY
    assert "10.43.0.0/16" in env["NO_PROXY"].split(",") and ".svc" in env["NO_PROXY"].split(",")
    assert env[OWN_DRIVER_ENV["name"]] == OWN_DRIVER_ENV["value"]


@pytest.mark.skipif(shutil.which("cloud-init") is None, reason="cloud-init validates the user data it would read")
def test_cloud_init_accepts_every_vms_user_data_of_a_lab(lab: Previewed, tmp_path: Path) -> None:
    snippets = sorted((lab.out / "cloud-init").glob("*.yaml"))
    assert len(snippets) == len(lab.config.failure_domains)
    for snippet in snippets:
        checked = subprocess.run(
            ["cloud-init", "schema", "--config-file", str(snippet)], capture_output=True, text=True
        )
        assert checked.returncode == 0, f"{snippet.name}: {checked.stdout}{checked.stderr}"
        assert APT_MIRROR in snippet.read_text() and INSTALLER["artifacts"] in snippet.read_text()
