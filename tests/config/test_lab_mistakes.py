"""Labs as they are: each mistake a new user made trying a lab behind a proxy or with no route out, that the
preview used to accept and the node then got wrong (issue 49, "Accepted, then wrong in the field"), is refused
naming its key with the fix, warned with the fix, or normalized with a note; all of one run together, and never a
traceback."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gpu_failure_domain.cloud_init import egress_files, user_data_document
from components.gpu_platform.release_values import release_values
from components.stack_check import validate_stack
from config.cross_key import config_warnings
from config.errors import ConfigError
from config.proxy import proxy_environment
from config.secrets import BY_KEY
from config.stack import StackConfig
from config.validate import normalization_notes
from offline.runner import ROOT_DIR, read_stack_file
from tests.lab_ca import make_lab_ca

TOKEN = "K10" + "0" * 64 + "::server:test"
PROXY = "http://proxy.lab.internal:3128"
Raw = dict[str, Any]


def _raw() -> Raw:
    return {k.removeprefix("gpu-pool:"): copy.deepcopy(v) for k, v in read_stack_file("prod").items()}


def _refusals(change: Callable[[Raw], None]) -> list[str]:
    raw = _raw()
    change(raw)
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw)
    return caught.value.messages


def _accepted(change: Callable[[Raw], None]) -> tuple[StackConfig, Raw]:
    raw = _raw()
    change(raw)
    return validate_stack(raw), raw


def _set(path: str, value: Any) -> Callable[[Raw], None]:
    def change(raw: Raw) -> None:
        *parents, last = path.split(".")
        node: Any = raw
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[last] = value

    return change


REFUSED: dict[str, tuple[Callable[[Raw], None], str]] = {
    "a proxy with only http (every download is https and would go direct)": (
        _set("proxy", {"http": PROXY}),
        f"gpu-pool:proxy: has http alone, and every download the VMs make is https (the RKE2 installer, GitHub, the "
        f"registries), which would then go direct: set https too (most proxies take both on one port: https: "
        f"{PROXY})",
    ),
    "a noProxy entry given as a URL": (
        _set("proxy", {"https": PROXY, "noProxy": ["https://files.lab.internal/rke2"]}),
        "gpu-pool:proxy.noProxy: 'https://files.lab.internal/rke2' is a URL: NO_PROXY entries are hosts "
        "(files.lab.internal), domains (.lab.internal) or CIDRs, compared with the host alone",
    ),
    "a cluster CIDR without its prefix length (a /32 in NO_PROXY)": (
        _set("rke2.clusterCidr", "10.42.0.0"),
        "gpu-pool:rke2.clusterCidr: '10.42.0.0' has no prefix length, which reads as a single address (/32): write "
        "the servers' CIDR, e.g. 10.42.0.0/16",
    ),
    "installer artifacts pointing at the release's own folder": (
        _set("rke2.installer", {"artifacts": "http://files.lab.internal/rke2/releases/v1.33.5%2Brke2r1"}),
        "gpu-pool:rke2.installer.artifacts: 'http://files.lab.internal/rke2/releases/v1.33.5%2Brke2r1' is the "
        "release's own folder, and install.sh appends /<version>/<file> itself (404): write "
        "http://files.lab.internal/rke2/releases",
    ),
    "installer artifacts pointing at the tarball": (
        _set("rke2.installer", {"artifacts": "http://files.lab.internal/rke2/v1.33.5+rke2r1/rke2.linux-amd64.tar.gz"}),
        "gpu-pool:rke2.installer.artifacts: 'http://files.lab.internal/rke2/v1.33.5+rke2r1/rke2.linux-amd64.tar.gz' "
        "is a file, and artifacts is the folder that holds the release folders (install.sh appends /<version>/<file> "
        "itself): write http://files.lab.internal/rke2",
    ),
    "extraValues.driver.env setting a variable gpu-pool:proxy sets": (
        lambda raw: raw.update(
            proxy={"https": PROXY},
            gpuOperator={
                **raw["gpuOperator"],
                "extraValues": {"driver": {"env": [{"name": "HTTPS_PROXY", "value": "x"}]}},
            },
        ),
        "gpu-pool:gpuOperator.extraValues.driver.env[0]: HTTPS_PROXY is set by gpu-pool:proxy (the driver container's "
        "proxy); change it there, and keep driver.env for your own variables",
    ),
    "extraValues.driver.env setting the digest of the driver's mounts, gpu-pool's own": (
        lambda raw: raw.update(
            gpuOperator={
                **raw["gpuOperator"],
                "extraValues": {"driver": {"env": [{"name": "GPU_POOL_DRIVER_MOUNTS_SHA256", "value": "x"}]}},
            },
        ),
        "gpu-pool:gpuOperator.extraValues.driver.env[0]: GPU_POOL_DRIVER_MOUNTS_SHA256 is gpu-pool's own (the digest "
        "of the apt sources and lab CA the driver mounts, so that a change of them restarts it): leave it out",
    ),
    "guestOs ubuntu-22.04 on a noble image (jammy's suites for the driver's sources)": (
        _set("proxmox.guestOs", "ubuntu-22.04"),
        "gpu-pool:proxmox: guestOs is ubuntu-22.04, but cloudImage 'noble-server-cloudimg-amd64.qcow2' is "
        "ubuntu-24.04 (noble): the apt sources and the driver images would be jammy's; leave guestOs out (the "
        "image's name says it) or set it to ubuntu-24.04",
    ),
    "a disk size in MiB": (
        _set("failureDomains.0.diskGiB", 204800),
        "gpu-pool:failureDomains[dc1].diskGiB: is 204800 GiB (200 TiB), beyond any worker's root disk: diskGiB is in "
        "GiB; 204800 MiB is 200 GiB, written diskGiB: 200",
    ),
    "the health check and the watcher in one namespace": (
        _set(
            "repair",
            {
                "healthCheck": {"enabled": True, "namespace": "gpu-pool-ops"},
                "unattended": {"enabled": True, "namespace": "gpu-pool-ops"},
            },
        ),
        "gpu-pool:repair.unattended.namespace: 'gpu-pool-ops' is already gpu-pool:repair.healthCheck.namespace's; each "
        "namespace gpu-pool creates is its own (one Namespace with its own Pod Security level): give it another "
        "name, e.g. gpu-pool-repair",
    ),
    "the health check in the operator's namespace (relabelled restricted)": (
        _set("repair", {"healthCheck": {"enabled": True, "namespace": "gpu-operator"}}),
        "gpu-pool:repair.healthCheck.namespace: 'gpu-operator' is already gpu-pool:gpuOperator.namespace's",
    ),
    "the node-check Jobs in the smoke test's namespace": (
        _set(
            "repair",
            {"healthCheck": {"enabled": True}, "unattended": {"enabled": True, "nodeCheckNamespace": "gpu-smoke-test"}},
        ),
        "gpu-pool:repair.unattended.nodeCheckNamespace: 'gpu-smoke-test' is already gpu-pool:smokeTest.namespace's",
    ),
    "the watcher in kube-system": (
        _set("repair", {"healthCheck": {"enabled": True}, "unattended": {"enabled": True, "namespace": "kube-system"}}),
        "gpu-pool:repair.unattended.namespace: 'kube-system' is a namespace every cluster has",
    ),
    "a tool image whose tag says Python 3.9": (
        _set("repair", {"healthCheck": {"enabled": True}, "unattended": {"enabled": True, "image": "python:3.9-slim"}}),
        "gpu-pool:repair.unattended.image: runs Python 3.9, and the payloads need 3.11 or newer (they fail at import "
        "in the pod): pin e.g. python:3.12-slim",
    ),
    "an https mirror on a lab name without the lab's CA": (
        _set("registryMirrors", {"*": ["https://harbor.lab.internal"]}),
        "gpu-pool:registryMirrors.*: https://harbor.lab.internal is https on a private name (harbor.lab.internal), "
        "which no public CA certifies, so its certificate comes from your lab's CA, and the VMs trust none: RKE2's "
        "agent and containerd fail with an x509 error on every pull from it; set gpu-pool:trustedCa to the lab CA's "
        "certificate (a PEM file path or its text; docs/air-gap.md, 'A lab CA')",
    ),
    "an https installer on a private address without the lab's CA": (
        _set("rke2.installer", {"script": "https://10.0.20.5/rke2/install.sh"}),
        "gpu-pool:rke2.installer.script: https://10.0.20.5/rke2/install.sh is https on a private name (10.0.20.5)",
    ),
    "an https apt mirror on .home.arpa without the lab's CA": (
        _set("aptMirror", {"uri": "https://apt.home.arpa/ubuntu"}),
        "gpu-pool:aptMirror.uri: https://apt.home.arpa/ubuntu is https on a private name (apt.home.arpa), which no "
        "public CA certifies, so its certificate comes from your lab's CA, and the VMs trust none: apt refuses it",
    ),
    "a lab CA that is a private key": (
        _set("trustedCa", "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"),
        "gpu-pool:trustedCa: block 1 (line 1) is a private key (not shown): trustedCa takes the CA's certificate alone",
    ),
    "a lab CA whose second block was damaged in copying": (
        _set("trustedCa", "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n"),
        "gpu-pool:trustedCa: block 1 (line 1): OpenSSL cannot read it as an X.509 certificate",
    ),
    "a lab CA file that does not exist": (
        _set("trustedCa", "certs/no-such-ca.crt"),
        "gpu-pool:trustedCa: 'certs/no-such-ca.crt' is neither PEM text nor a file that exists (a relative path is "
        "read from the project directory)",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_a_lab_mistake_the_node_would_get_wrong_is_refused_naming_its_key_and_the_fix(case: str) -> None:
    change, said = REFUSED[case]

    messages = _refusals(change)

    assert any(message.startswith(said) for message in messages), messages


# Mistakes of different keys, made together in one stack file.
TOGETHER = (
    "a proxy with only http (every download is https and would go direct)",
    "a cluster CIDR without its prefix length (a /32 in NO_PROXY)",
    "installer artifacts pointing at the release's own folder",
    "guestOs ubuntu-22.04 on a noble image (jammy's suites for the driver's sources)",
    "a disk size in MiB",
    "a tool image whose tag says Python 3.9",
    "an https apt mirror on .home.arpa without the lab's CA",
    "a lab CA whose second block was damaged in copying",
)


def test_every_lab_mistake_of_one_stack_file_is_refused_in_one_run_without_a_traceback(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT_DIR / "Pulumi.prod.yaml").read_text())
    raw = {k.removeprefix("gpu-pool:"): v for k, v in config["config"].items()}
    for case in TOGETHER:
        REFUSED[case][0](raw)
    config["config"] = {f"gpu-pool:{k}": v for k, v in raw.items()}
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(config))

    done = subprocess.run(
        [sys.executable, "-m", "offline.preview", "--stack-dir", str(tmp_path), "--out", str(tmp_path / "o")],
        cwd=ROOT_DIR, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip

    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = [line.strip() for line in done.stderr.splitlines()]
    assert lines[0] == "invalid stack config:"
    missing = [case for case in TOGETHER if not any(line.startswith(REFUSED[case][1]) for line in lines)]
    assert missing == [], lines


# ---------------------------------------------------------------------------------------- normalized, or warned


def test_a_docker_hub_api_host_is_taken_as_docker_io_with_a_note() -> None:
    stack, raw = _accepted(_set("registryMirrors", {"registry-1.docker.io": ["http://mirror.lab.internal:5000"]}))
    document = user_data_document(stack.failure_domains[0], stack.rke2, TOKEN, mirrors=stack.mirrors)
    [file] = [f for f in document["write_files"] if f["path"] == "/etc/rancher/rke2/registries.yaml"]

    assert list(yaml.safe_load(file["content"])["mirrors"]) == ["docker.io"]
    assert normalization_notes(raw) == [
        "gpu-pool:registryMirrors.registry-1.docker.io: containerd keys a mirror by the registry an image names, and "
        "Docker Hub's images name docker.io: written as docker.io (rename the key to silence this)"
    ]


def test_docker_hub_given_twice_under_its_two_names_is_refused() -> None:
    both = {"docker.io": ["http://a.lab:5000"], "index.docker.io": ["http://b.lab:5000"]}
    messages = _refusals(_set("registryMirrors", both))
    assert any("index.docker.io: is Docker Hub, already given as docker.io" in m for m in messages), messages


def test_an_apt_mirror_url_of_a_suites_folder_is_the_archive_with_a_note() -> None:
    stack, raw = _accepted(_set("aptMirror", {"uri": "http://apt.lab.internal/ubuntu/dists/noble/"}))

    assert stack.apt_mirror is not None and stack.apt_mirror.uri == "http://apt.lab.internal/ubuntu"
    assert normalization_notes(raw) == [
        "gpu-pool:aptMirror.uri: http://apt.lab.internal/ubuntu/dists/noble/ names a suite's folder; apt appends "
        "dists/<suite> to the archive's URL itself, so it is written as http://apt.lab.internal/ubuntu (write that to "
        "silence this)"
    ]


def test_a_harbor_project_path_in_an_endpoint_is_warned_with_the_rewrite_that_does_it() -> None:
    stack, _ = _accepted(_set("registryMirrors", {"docker.io": ["http://harbor.lab.internal/dockerhub"]}))

    assert (
        "gpu-pool:registryMirrors.docker.io: http://harbor.lab.internal/dockerhub has a path, so containerd pulls from "
        "http://harbor.lab.internal/dockerhub/v2/...; a Harbor project is not such a path (Harbor serves /v2/ at its "
        'root): write {endpoint: [http://harbor.lab.internal], rewrite: {"^(.*)$": "dockerhub/$1"}} (registries.yaml '
        "rewrite); keep the path only for a registry that serves one (Artifactory, Nexus)"
    ) in config_warnings(stack)


def test_a_harbor_project_rewrite_reaches_registries_yaml_and_is_not_warned() -> None:
    mirror = {"endpoint": ["http://harbor.lab.internal"], "rewrite": {"^(.*)$": "dockerhub/$1"}}
    stack, _ = _accepted(_set("registryMirrors", {"docker.io": mirror}))
    document = user_data_document(stack.failure_domains[0], stack.rke2, TOKEN, mirrors=stack.mirrors)
    [file] = [f for f in document["write_files"] if f["path"] == "/etc/rancher/rke2/registries.yaml"]

    assert yaml.safe_load(file["content"])["mirrors"] == {"docker.io": mirror}
    assert not [w for w in config_warnings(stack) if "has a path" in w]
    assert any(
        "rewrite.[: " in m or "rewrite" in m
        for m in _refusals(_set("registryMirrors", {"docker.io": {**mirror, "rewrite": {"(": "x"}}}))
    )


def test_an_https_mirror_on_a_public_name_is_noted_to_chain_to_a_public_ca() -> None:
    stack, _ = _accepted(_set("registryMirrors", {"docker.io": ["https://mirror.example.com"]}))

    assert (
        "gpu-pool:registryMirrors.docker.io: https://mirror.example.com is https: its certificate must chain to a "
        "public CA (or set gpu-pool:trustedCa), the only roots the VMs trust"
    ) in config_warnings(stack)


def test_extra_driver_env_is_joined_to_the_proxys_variables_not_replacing_them() -> None:
    def change(raw: Raw) -> None:
        raw["proxy"] = {"https": PROXY}
        raw["gpuOperator"]["extraValues"] = {"driver": {"env": [{"name": "MY_VAR", "value": "1"}]}}

    stack, _ = _accepted(change)
    values = release_values(
        stack.gpu_operator, stack.kyverno, stack.monitoring, driver_env=proxy_environment(stack.proxy, stack.rke2)
    )

    names = [item["name"] for item in values["driver"]["env"]]
    assert "HTTPS_PROXY" in names and "NO_PROXY" in names and names[-1] == "MY_VAR"


def test_an_apt_mirror_no_proxy_reaches_directly_is_direct_for_apt_too() -> None:
    def change(raw: Raw) -> None:
        raw["proxy"] = {"https": PROXY, "http": PROXY, "noProxy": [".lab.internal"]}
        raw["aptMirror"] = {"uri": "http://apt.lab.internal/ubuntu"}

    stack, _ = _accepted(change)
    domain = stack.failure_domains[0]
    document = user_data_document(domain, stack.rke2, TOKEN, proxy=stack.proxy, apt_mirror=stack.apt_mirror)
    files = {f["path"]: f["content"] for f in egress_files(domain, stack.rke2, stack.proxy, {}, stack.apt_mirror)}

    direct = 'Acquire::http::Proxy::apt.lab.internal "DIRECT";\nAcquire::https::Proxy::apt.lab.internal "DIRECT";\n'
    assert document["apt"]["conf"] == direct
    assert files["/etc/apt/apt.conf.d/90cloud-init-aptproxy"].endswith(direct)


def test_registry_tls_without_verification_is_accepted_with_a_warning_and_a_half_client_certificate_is_not() -> None:
    secret = BY_KEY["registryAuth"]
    insecure = '{"harbor.lab.internal": {"tls": {"insecure_skip_verify": true}}}'

    assert secret.shape(insecure) is None
    assert secret.warnings(insecure) == [
        "gpu-pool:registryAuth: harbor.lab.internal.tls.insecure_skip_verify is true: containerd then pulls from "
        "whoever answers for that host, unverified; give the registry's CA instead (gpu-pool:trustedCa, or "
        "tls.ca_file)"
    ]
    half = '{"harbor.lab.internal": {"tls": {"key_file": "/etc/ssl/private/k.pem"}}}'
    assert secret.shape(half) == (
        "harbor.lab.internal.tls: give cert_file and key_file together (the client certificate and its key)"
    )
    relative = '{"harbor.lab.internal": {"tls": {"ca_file": "ca.pem"}}}'
    assert "a file on the VM is an absolute path" in (secret.shape(relative) or "")


def test_a_lab_ca_bundle_names_its_first_bad_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = make_lab_ca(tmp_path / "ca").pem
    bundle = good + "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"
    (tmp_path / "bundle.crt").write_text(bundle)
    monkeypatch.chdir(tmp_path)

    messages = _refusals(_set("trustedCa", "bundle.crt"))

    line = good.count("\n") + 1
    assert any(
        m.startswith(f"gpu-pool:trustedCa: 'bundle.crt' block 2 (line {line}): its base64 is damaged") for m in messages
    ), messages
    assert validate_stack({**_raw(), "trustedCa": good}).trusted_certificates == (good,)
